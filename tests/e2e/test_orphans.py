"""An orphan left by a child ends with its run and is reaped there: the run
shim, child subreaper of the attempt, reaps it; serve is left no zombie."""
from pathlib import Path

from inflight_testing.procfs import process_exists, zombies_of
from inflight_testing.waiting import wait_for
from conftest import script_child, write_config


def test_orphan_left_by_a_child_ends_with_its_run_and_is_reaped(serve_factory, tmp_path):
    config = write_config(tmp_path / "config.json", script_child("orphaner.py"))
    serve = serve_factory("--config", config)
    serve.wait_ready()
    run_id = serve.submit()
    serve.wait_status(run_id, "succeeded")
    orphan = int((tmp_path / ".inflight" / "runs" / run_id / "orphan").read_text())
    # The attempt ends only once the shim reaped every process of it.
    assert not process_exists(orphan)
    assert not Path(f"/proc/{orphan}").exists(), "the orphan is still a zombie"
    assert zombies_of(serve.proc.pid) == []
