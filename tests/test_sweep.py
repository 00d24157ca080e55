"""`tiler sweep`: statuses and reasons, exit codes, --jobs equality, resume after SIGKILL, Ctrl-C, Dask, export.

Searches are kept cheap by pinning most knobs (`--fix`), the same way a user narrows a space: each search still
runs the real enumeration, model and branch and bound, on a few hundred candidates instead of ~10^5.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import FAST

from tiler.cli import sweep_command
from tiler.errors import TilerError
from tiler.export import validate
from tiler.progress import Progress
from tiler.sweep import journal_path, run_sweep

ROOT = Path(__file__).resolve().parent.parent
# ~0.1-0.3 s per search: slow enough that a kill lands mid-way
MEDIUM = ["base_m=128", "base_n=128", "base_k=64", "step_ka=4", "step_kb=4", "l1_stages=2", "preload=1"]


def write(path: Path, text: str) -> Path:
    path.write_text(text.strip() + "\n")
    return path


def grid(path: Path, ms=(64, 128, 256), ns=(128, 256), ks=(128, 256, 512)) -> Path:
    lines = ["name,M,N,K,count,extra"]
    i = 0
    for m in ms:
        for n in ns:
            for k in ks:
                i += 1
                lines.append(f"layer{i},{m},{n},{k},{i % 3 + 1},x{i}")
    return write(path, "\n".join(lines))


def invoke(args):
    return CliRunner().invoke(sweep_command, [str(a) for a in args], catch_exceptions=False)


def fix_args(pins):
    out = []
    for p in pins:
        out += ["--fix", p]
    return out


MIXED = """
name,M,N,K,dtype,count,owner
good,256,256,256,fp16,2,alice
letters,abc,256,256,fp16,1,bob
negative,-128,256,256,fp16,1,carol
no_m,,256,256,fp16,1,dave
bad_dtype,256,256,256,fp12,1,erin
too_small,16,256,256,fp16,1,frank
bad_count,256,256,256,fp16,many,grace
twin,256,256,256,fp16,3,heidi
bf16,128,256,512,bf16,1,ivan
"""


def test_good_and_malformed_rows_get_statuses_and_reasons(tmp_path):
    shapes = write(tmp_path / "s.csv", MIXED)
    out = tmp_path / "o.csv"
    res = invoke(
        [shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", out, "--quiet", *fix_args(FAST)]
    )
    assert res.exit_code == 1, res.output  # some rows failed, the file is still complete
    df = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(df["name"]) == [
        "good",
        "letters",
        "negative",
        "no_m",
        "bad_dtype",
        "too_small",
        "bad_count",
        "twin",
        "bf16",
    ]  # input order, every row once
    assert list(df["owner"])[:2] == ["alice", "bob"]  # unknown columns pass through
    by = df.set_index("name")
    assert set(by.loc[["good", "twin", "bf16"], "status"]) == {"ok"}
    reasons = {
        "letters": "M:",
        "negative": "M:",
        "no_m": "M: missing",
        "bad_dtype": "dtype:",
        "too_small": "no feasible tiling",
        "bad_count": "count:",
    }
    for name, reason in reasons.items():
        assert by.loc[name, "status"] == "error"
        assert reason in by.loc[name, "error"], (name, by.loc[name, "error"])
    assert "fix_split" in by.loc["too_small", "error"]  # the rule that rejected it, naming M/N/K
    for col in (
        "chip",
        "base_m",
        "time_us",
        "bound",
        "mac_us",
        "mte2_us",
        "cores_used",
        "waves",
        "balance",
        "l2_hit_rate",
        "hbm_bytes",
        "l2_bytes",
        "roofline_us",
        "strategy",
        "evaluated",
        "proven_optimal",
    ):
        assert col in df.columns, col
    assert by.loc["good", "base_m"] == "64" and by.loc["good", "strategy"] == "exhaustive"
    assert by.loc["good", "proven_optimal"] == "True" and int(by.loc["good", "evaluated"]) > 0
    assert by.loc["good", "time_us"] == by.loc["twin", "time_us"]  # same problem: searched once
    assert float(by.loc["good", "time_us"]) >= float(by.loc["good", "roofline_us"])
    assert by.loc["letters", "base_m"] == "" and by.loc["letters", "time_us"] == ""
    # the summary: ok/failed, count-weighted total, slowest rows with their bound
    assert "3 ok, 6 failed" in res.stderr and "predicted total" in res.stderr and "slowest" in res.stderr
    ok = df[df.status == "ok"]
    total = sum(float(t) * int(c) for t, c in zip(ok.time_us, ok["count"], strict=True))
    assert f"{total:,.1f} us" in res.stderr


def test_exit_codes(tmp_path):
    good = write(tmp_path / "g.csv", "M,N,K\n128,256,256\n256,256,512")
    out = tmp_path / "o.csv"
    base = ["--op", "matmul", "--chip", "ascend910b3", "--out", out, "--quiet", *fix_args(FAST)]
    assert invoke([good, *base]).exit_code == 0
    res = invoke([tmp_path / "missing.csv", *base])
    assert res.exit_code == 2 and "no such file" in res.stderr
    res = invoke([good, "--op", "matmul", "--chip", "ascend910zz", "--out", out])
    assert res.exit_code == 2 and "chip" in res.stderr and "ascend910" in res.stderr
    res = invoke([good, "--op", "conv9d", "--chip", "ascend910b3", "--out", out])
    assert res.exit_code == 2 and "op" in res.stderr
    res = invoke([write(tmp_path / "nok.csv", "M,N\n1,2"), *base])
    assert res.exit_code == 2 and "'K' is missing" in res.stderr
    res = invoke([good, *base, "--jobs", "-1"])
    assert res.exit_code == 2 and "--jobs" in res.stderr
    res = invoke([good, *base, "--strategy", "annealing"])
    assert res.exit_code == 2 and "--strategy" in res.stderr
    res = invoke([good, *base, "--fix", "base_q=3"])
    assert res.exit_code == 2 and "base_q" in res.stderr
    res = invoke([good, "--chip", "ascend910b3"])
    assert res.exit_code == 2  # click: missing --op


def test_jobs2_equals_jobs1_and_shapes_are_searched_once(tmp_path):
    shapes = grid(tmp_path / "s.csv")
    df = pd.read_csv(shapes)
    df = pd.concat([df, df.head(3).assign(name="again")])  # repeated problems
    df.to_csv(shapes, index=False)
    outs = {}
    for jobs in (1, 2):
        out = tmp_path / f"o{jobs}.csv"
        rep = run_sweep(shapes, "matmul", "ascend910b3,ascend910b4", out, jobs=jobs, fix=FAST)
        assert rep.failed == 0 and len(rep.frame) == 2 * len(df)
        assert rep.computed == 2 * 18  # 18 distinct shapes x 2 chips; the 3 repeats reuse them
        outs[jobs] = out.read_bytes()
    assert outs[1] == outs[2]
    got = pd.read_csv(tmp_path / "o1.csv")
    assert list(got["chip"][:4]) == ["ascend910b3", "ascend910b4", "ascend910b3", "ascend910b4"]  # row-major
    assert list(got["name"][::2]) == list(df["name"])


def test_chips_of_two_families_take_their_own_pins(tmp_path):
    shapes = write(tmp_path / "s.csv", "M,N,K\n256,256,256")
    pins = [*FAST, "BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=64", "num_stages=3", "num_warps=4"]
    rep = run_sweep(
        shapes, "matmul", "ascend910b3,h200", tmp_path / "o.csv", fix=pins, library=tmp_path / "l.json"
    )
    assert rep.failed == 0, rep.frame["error"].tolist()
    row = rep.frame.set_index("chip")
    assert row.loc["ascend910b3", "base_m"] == 64 and row.loc["ascend910b3", "BLOCK_M"] is None
    assert row.loc["h200", "BLOCK_M"] == 64 and row.loc["h200", "base_m"] is None
    cuda = json.loads((tmp_path / "l.h200.json").read_text())
    assert cuda["entries"][0]["targets"]["triton"]["kwargs"]["BLOCK_M"] == 64


def test_tpe_is_seeded_in_memory_and_equal_across_jobs(tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    shapes = grid(tmp_path / "s.csv", ms=(64, 128), ns=(128,), ks=(128, 256))
    outs = []
    for jobs in (1, 2):
        out = tmp_path / f"o{jobs}.csv"
        rep = run_sweep(
            shapes, "matmul", "ascend910b3", out, jobs=jobs, strategy="tpe", trials=8, seed=1, fix=FAST
        )
        assert rep.failed == 0 and set(rep.frame["strategy"]) == {"tpe"}
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert not (tmp_path / "results").exists()  # no optuna study file: the journal is the sweep's memory


def _journal_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(str(db), timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _sigint_default() -> None:
    """Ctrl-C as a terminal delivers it: a suite started in the background (`cmd &` in a script) passes its
    children SIGINT ignored, and Python then never raises KeyboardInterrupt, whatever tiler does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args, tmp_path):
    cmd = [sys.executable, "-m", "tiler.sweep", *map(str, args)]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_default,  # noqa: PLW1509 - the test process starts no threads that fork
    )


def _wait_rows(proc, db: Path, n: int, timeout: float = 120.0) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = _journal_rows(db)
        if got >= n or proc.poll() is not None:
            return got
        time.sleep(0.01)
    raise AssertionError("the sweep did not journal rows in time")


def test_sigkill_then_resume_gives_every_row_once_equal_to_uninterrupted(tmp_path):
    shapes = grid(tmp_path / "s.csv", ms=(128, 256), ns=(128, 256), ks=(128, 256, 512))  # 12 shapes
    out = tmp_path / "killed.csv"
    args = [shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", out, "--quiet", *fix_args(MEDIUM)]
    db = journal_path(out)
    proc = _start(args, tmp_path)
    seen = _wait_rows(proc, db, 3)
    proc.send_signal(signal.SIGKILL)  # no clean-up code runs
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    kept = _journal_rows(db)
    assert 3 <= kept < 12 and kept >= seen and not out.exists()
    proc = _start([*args, "--resume"], tmp_path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"{12 - kept} searched, {kept} reused" in err  # nothing done twice
    con = sqlite3.connect(str(db))
    keys = [k for (k,) in con.execute("SELECT key FROM results")]
    con.close()
    assert len(keys) == len(set(keys)) == 12
    ref = tmp_path / "straight.csv"
    rep = run_sweep(shapes, "matmul", "ascend910b3", ref, fix=MEDIUM)
    assert rep.computed == 12
    assert out.read_bytes() == ref.read_bytes()


def big_grid(path: Path) -> Path:
    """12 shapes of 512-1024 whose whole spaces take 100-300 ms each to search: a sweep of them is still busy when
    its first rows are journalled."""
    return grid(path, ms=(512, 1024), ns=(512, 1024), ks=(256, 512, 1024))


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_prints_resume_and_exits_130(tmp_path):
    # 12 of the larger shapes, whole spaces searched (~2 s of CPU; 12 pinned shapes took 0.3 s, and a run could
    # finish before the signal and exit 0): the signal goes when the 2nd row is journalled, 10 rows before the end
    shapes = big_grid(tmp_path / "s.csv")
    out = tmp_path / "o.csv"
    args = [shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", out, "--jobs", "2"]
    proc = _start(args, tmp_path)
    _wait_rows(proc, journal_path(out), 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    assert "tiler sweep" in err and "--jobs 2" in err
    proc = _start([*args, "--resume"], tmp_path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "reused from the journal" in err


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["parent", "process-group"])
def test_sigterm_stops_as_ctrl_c_does_checkpoints_the_journal_and_exits_143(tmp_path, group):
    """SIGTERM (kill, timeout, a batch scheduler; to the sweep alone or to its whole process group, workers
    included) ends the sweep as Ctrl-C does: the resume command, no traceback, the journal closed and
    checkpointed (no -wal or -shm file left), exit 143; --resume then finishes the rest."""
    shapes = big_grid(tmp_path / "s.csv")  # as above: the signal lands with 10 of 12 rows to go
    out = tmp_path / "o.csv"
    args = [shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", out, "--jobs", "2"]
    cmd = [sys.executable, "-m", "tiler.sweep", *map(str, args)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=group
    )
    db = journal_path(out)
    _wait_rows(proc, db, 2)
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "--resume" in err and "Traceback" not in err
    assert db.exists() and not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    proc = _start([*args, "--resume"], tmp_path)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "reused from the journal" in err


def test_stopping_the_pool_ends_a_worker_in_the_middle_of_its_task():
    """An interrupted sweep ends its workers at once: a worker busy with a task (here an hour's sleep standing in
    for a long search) is terminated and joined by _stop_pool, not left to finish it (a Ctrl-C'd sweep then
    waited at exit for every running search, whose result it throws away)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from tiler.sweep.executors import _stop_pool

    pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"))
    fut = pool.submit(time.sleep, 3600)
    while not fut.running():  # handed to the worker's queue: cancel_futures no longer takes it back
        time.sleep(0.001)
    workers = list(pool._processes.values())
    try:
        _stop_pool(pool)
        assert workers and not any(w.is_alive() for w in workers)
    finally:
        for w in workers:
            w.kill()


def test_resume_is_keyed_by_problem_not_row_number_and_fresh_without_resume(tmp_path):
    shapes = grid(tmp_path / "s.csv", ms=(64, 128), ns=(128,), ks=(128, 256))
    out = tmp_path / "o.csv"
    first = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST)
    assert first.computed == 4
    df = pd.read_csv(shapes).iloc[::-1]  # re-ordered, plus one new shape
    df = pd.concat(
        [df, pd.DataFrame([{"name": "new", "M": 256, "N": 128, "K": 128, "count": 1, "extra": ""}])]
    )
    df.to_csv(shapes, index=False)
    again = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST, resume=True)
    assert (again.computed, again.reused) == (1, 4)
    assert list(pd.read_csv(out)["name"]) == list(df["name"])
    other_seed = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST, seed=7, resume=True)
    assert other_seed.computed == 5  # the seed is part of the key
    fresh = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST)
    assert (fresh.computed, fresh.reused) == (5, 0)


def test_internal_error_is_a_row_error_and_is_retried_on_resume(tmp_path, monkeypatch):
    import tiler.search

    shapes = grid(tmp_path / "s.csv", ms=(64, 128), ns=(128,), ks=(128,))
    out = tmp_path / "o.csv"
    real = tiler.search.search

    def flaky(problem, *a, **kw):
        if problem.M == 128:
            raise RuntimeError("boom")
        return real(problem, *a, **kw)

    monkeypatch.setattr(tiler.search, "search", flaky)
    rep = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST)
    assert (rep.ok, rep.failed) == (1, 1)
    assert rep.frame["error"].iloc[1] == "internal: RuntimeError: boom"
    monkeypatch.setattr(tiler.search, "search", real)
    rep = run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST, resume=True)
    assert (rep.ok, rep.failed, rep.computed, rep.reused) == (2, 0, 1, 1)


def test_dask_cluster_equals_local(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    shapes = grid(tmp_path / "s.csv", ms=(64, 128), ns=(128, 256), ks=(128, 256))
    local = tmp_path / "local.csv"
    run_sweep(shapes, "matmul", "ascend910b3,ascend910b4", local, fix=FAST)
    remote = tmp_path / "dask.csv"
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        rep = run_sweep(
            shapes,
            "matmul",
            "ascend910b3,ascend910b4",
            remote,
            fix=FAST,
            scheduler=cluster.scheduler_address,
            library=tmp_path / "lib.json",
        )
    assert rep.computed == 16 and rep.failed == 0
    assert remote.read_bytes() == local.read_bytes()
    assert [p.name for p in rep.libraries] == ["lib.ascend910b3.json", "lib.ascend910b4.json"]


def test_missing_dask_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    shapes = write(tmp_path / "s.csv", "M,N,K\n128,128,128")
    with pytest.raises(TilerError, match=r"tiler\[dask\]"):
        run_sweep(
            shapes, "matmul", "ascend910b3", tmp_path / "o.csv", fix=FAST, scheduler="tcp://127.0.0.1:1"
        )


def test_parquet_output_or_a_clear_error(tmp_path, monkeypatch):
    shapes = write(tmp_path / "s.csv", "name,M,N,K\nx,128,128,128\ny,256,128,128")
    try:
        import pyarrow  # noqa: F401

        have = True
    except ImportError:
        have = False
    if have:
        out = tmp_path / "o.parquet"
        run_sweep(shapes, "matmul", "ascend910b3", out, fix=FAST)
        got = pd.read_parquet(out)
        csv = tmp_path / "o.csv"
        run_sweep(shapes, "matmul", "ascend910b3", csv, fix=FAST)
        ref = pd.read_csv(csv)
        assert list(got.columns) == list(ref.columns) and len(got) == 2
        assert list(got["time_us"].astype(float)) == list(ref["time_us"])
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    res = invoke([shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", tmp_path / "p.parquet"])
    assert res.exit_code == 2 and "pip install pyarrow" in res.stderr


def test_library_per_chip_deduplicated_and_valid(tmp_path):
    shapes = write(tmp_path / "s.csv", MIXED)
    lib = tmp_path / "lib.json"
    rep = run_sweep(shapes, "matmul", "ascend910b3,ascend910b4", tmp_path / "o.csv", fix=FAST, library=lib)
    assert [p.name for p in rep.libraries] == ["lib.ascend910b3.json", "lib.ascend910b4.json"]
    for path, chip in zip(rep.libraries, ("ascend910b3", "ascend910b4"), strict=True):
        doc = json.loads(path.read_text())
        validate(doc)
        assert doc["chip"]["id"] == chip and doc["op"] == "matmul"
        keys = [e["key"] for e in doc["entries"]]
        assert keys == ["matmul:M=256,N=256,K=256,batch=1:fp16", "matmul:M=128,N=256,K=512,batch=1:bf16"]
        entry = doc["entries"][0]
        assert set(entry) >= {"key", "problem", "tiling", "estimate", "targets"}
        assert entry["tiling"]["base_m"] == 64 and set(entry["targets"]) <= {"catlass", "ascendc"}
    one = run_sweep(shapes, "matmul", "ascend910b3", tmp_path / "o1.csv", fix=FAST, library=lib)
    assert one.libraries == [lib]  # one chip: the path as given


def test_progress_only_on_a_tty(tmp_path):
    import io

    class TTY(io.StringIO):
        def isatty(self):
            return True

    plain = io.StringIO()
    p = Progress(10, stream=plain)
    p.update(5)
    p.close()
    assert plain.getvalue() == ""  # not a terminal: nothing
    tty = TTY()
    p = Progress(10, label="sweep", done=2, stream=tty, interval_s=0)
    p.update(3)
    p.close()
    text = tty.getvalue()
    assert "sweep 5/10" in text and "ETA" in text and "/s" in text and text.endswith("\n")
    quiet = TTY()
    p = Progress(10, stream=quiet, quiet=True)
    p.update(10)
    p.close()
    assert quiet.getvalue() == ""


def _flip_a_digit(text: str) -> str:
    """`text` (a result's JSON) with the first digit of its estimate's time changed: still well-formed JSON of
    the same shape, a number the output prints."""
    res = json.loads(text)
    t = repr(res["row"]["time_us"])
    i = next(i for i, ch in enumerate(t) if ch.isdigit() and ch != "0")
    res["row"]["time_us"] = float(t[:i] + str(int(t[i]) % 9 + 1) + t[i + 1 :])
    return json.dumps(res)


def test_a_changed_number_in_a_journaled_result_is_searched_again(tmp_path):
    """Each journal row carries a checksum of what was written (issue 31): a result whose number was changed
    afterwards (one digit of its time: well-formed, and nothing else could tell it from a real one) fails the
    check on --resume, is searched again (one stderr note counts it) and the output is byte for byte the clean
    run's; the other rows are reused. A journal of a tiler before checksums (no digest column) is read, its
    rows are searched again (the note says why) and it gains the column."""
    shapes = grid(tmp_path / "s.csv", ms=(64, 128), ns=(128,), ks=(128, 256))  # 4 shapes
    out = tmp_path / "o.csv"
    args = [shapes, "--op", "matmul", "--chip", "ascend910b3", "--out", out, *fix_args(FAST)]
    assert invoke(args).exit_code == 0
    clean = out.read_bytes()
    db = journal_path(out)
    con = sqlite3.connect(str(db))
    key, text = con.execute("SELECT key, result FROM results WHERE status = 'ok' order by rowid").fetchone()
    changed = _flip_a_digit(text)
    con.execute("UPDATE results SET result = ? WHERE key = ?", (changed, key))
    con.commit()
    con.close()
    res = invoke([*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert "1 searched, 3 reused" in res.output
    note = [ln for ln in res.output.splitlines() if "checksum" in ln]
    assert len(note) == 1 and "1 journaled result(s)" in note[0] and "1 changed" in note[0], res.output
    assert out.read_bytes() == clean
    # the changed number would have reached the output: the check is what kept it out
    t = json.loads(changed)["row"]["time_us"]
    assert t != json.loads(text)["row"]["time_us"] and str(t) not in clean.decode()
    # an older tiler's journal: no checksum column
    con = sqlite3.connect(str(db))
    con.execute("ALTER TABLE results DROP COLUMN digest")
    con.commit()
    con.close()
    res = invoke([*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert "4 searched, 0 reused" in res.output and "4 written without a checksum" in res.output, res.output
    assert out.read_bytes() == clean
    con = sqlite3.connect(str(db))
    assert con.execute("SELECT COUNT(*) FROM results WHERE digest IS NOT NULL").fetchone()[0] == 4
    con.close()
    res = invoke([*args, "--resume"])  # now every row checks out
    assert "0 searched, 4 reused" in res.output and "checksum" not in res.output, res.output
    assert out.read_bytes() == clean
