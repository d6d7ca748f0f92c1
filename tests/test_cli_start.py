"""What `zfsnas-exporter` does between its start and its first answer: zfs/zpool commands wait for
that answer (`Exporter.hold_commands`), so the first page is not slowed by their forks and parses."""

import sys
import threading
import time

from tests.conftest import linux_tree
from zfsnas.cli import build_exporter, build_parser


def test_commands_wait_for_the_first_page_and_run_once_it_is_rendered(tmp_path):
    tree = linux_tree("2.3.2")
    args = build_parser().parse_args([f"--path.procfs={tree}/proc", f"--path.sysfs={tree}/sys",
                                      "--collector.disable-defaults", "--collector.arc"])
    exporter = build_exporter(args)
    marker = tmp_path / "ran"
    out: list = []
    try:
        exporter.hold_commands(60)
        runner = exporter.owned_runner
        assert runner is not None
        thread = threading.Thread(target=lambda: out.append(
            runner.run([sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x'); print('ok')"])))
        thread.start()
        time.sleep(0.5)
        assert out == [] and not marker.exists()
        assert "\nzfs_arc_size_bytes 11811160064\n" in exporter.render()
        thread.join(30)
        assert out == ["ok\n"] and marker.read_text() == "x"
    finally:
        exporter.stop()
