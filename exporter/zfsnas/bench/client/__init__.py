"""Experiments a client drives: the NAS measures or stores what something else ran, and the results
are configurations like a run's.

- watch.py: `zfsnas-bench watch`: measure from the NAS a workload a client drives (an SMB or NFS
  copy, CrystalDiskMark over iSCSI), through the sources the exporter reads;
- importers.py: results measured elsewhere (CrystalDiskMark text, fio JSON) read whole, checked
  and bounded before anything is stored;
- identity.py: what a configuration takes from a dataset that exists (properties, layout, module
  parameters, version, host) and `--set KEY=VALUE` labels.

Imports the store, the sources, running/'s readers of a dataset and of the system (zfs.py,
parameters.py, probes.py) and answering/'s crystaldiskmark.py; creates, writes and destroys
nothing but the results database.
"""
