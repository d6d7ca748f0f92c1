"""zfsnas: a Prometheus exporter and benchmark runner for ZFS NAS owners."""

__version__ = "0.1.0"
