"""Sketch worker processes: same verdicts as sketching in-process, and no child left behind."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from streamfilter import Chunks, FilterConfig, RetweetPolicy, StreamFilter, _launch, _pipeline, _protocol, _workers
from streamfilter._engine import PreparedBatch, Sketcher
from streamfilter._workers import SketchProcess
from streamfilter.adapters import record_adapter
from streamfilter.cli import _parser as cli_parser
from tests.conftest import FIXTURES
from tests.conftest import replay_command as replay
from tests.test_crash import make_stream

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX process tests")


def mixed_lines() -> list[tuple[int, bytes]]:
    """Every fixture's lines, then lines no adapter accepts: all the kinds of entry a batch holds."""
    lines: list[bytes] = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        if not path.name.endswith(".expected.jsonl"):
            lines += path.read_bytes().splitlines()
    lines += [b'{"id": 1, "text": ', b"\xff\xfe not utf-8", b"[1, 2]", b"plain text line", b'{"likes": 3}']
    lines.append('{"id": 2, "text": "a post that a client cut off in the midd\u2026"}'.encode())
    return list(enumerate(lines, 1))


def entry_view(batch: PreparedBatch) -> list[tuple[object, ...]]:
    rows = batch.entries
    columns = (rows.lines, rows.raws, rows.kinds, rows.reasons, rows.sketch_index, rows.reference, rows.ids)
    return [(*row, rows.post(at)) for at, row in enumerate(zip(*columns, strict=True))]


@pytest.mark.anyio
@pytest.mark.parametrize("retweets", ["content", "drop", "keep"])
async def test_a_worker_prepares_what_this_process_prepares(retweets: str) -> None:
    sketcher = Sketcher(FilterConfig(seed=1, retweet_policy=RetweetPolicy(retweets)), record_adapter("auto"))
    records = mixed_lines()
    here = sketcher.prepare(records)
    worker = await SketchProcess.start(sketcher)
    try:
        before = time.time()
        sent = await worker.prepare(records)
        there = sent.prepared()  # rebuilt where the store stage judges it
        after = time.time()
        again = (await worker.prepare(records[:7])).prepared()  # the same child serves batch after batch
    finally:
        await worker.aclose()
    assert entry_view(there) == entry_view(here)
    assert (sent.first_line, sent.last_line) == (here.first_line, here.last_line) == (1, records[-1][0])
    assert set(here.entries.kinds) >= {None, "invalid"}  # the lines cover decided and sketched entries
    assert len(there.sketches) == len(here.sketches) > 100
    assert any(s.cut_off for s in there.sketches)
    for a, b in zip(here.sketches, there.sketches, strict=True):
        assert (a.post_id, a.made_up_id, a.refers_to, a.cut_off) == (b.post_id, b.made_up_id, b.refers_to, b.cut_off)
        # a post without a time of its own is stamped with the clock when it is sketched
        assert a.timestamp == b.timestamp or before <= b.timestamp <= after
        assert np.array_equal(a.band_keys, b.band_keys) and np.array_equal(a.shingles, b.shingles)
    assert entry_view(again) == entry_view(sketcher.prepare(records[:7]))


@pytest.mark.anyio
async def test_batches_sent_before_the_first_answer_come_back_to_their_callers() -> None:
    # A replay keeps two batches in each worker; five at once exercise the queue.
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    records = mixed_lines()
    batches = [records[start : start + 40] for start in range(0, 200, 40)]
    results: dict[int, PreparedBatch] = {}
    worker = await SketchProcess.start(sketcher)
    try:

        async def prepare(index: int) -> None:
            results[index] = (await worker.prepare(batches[index])).prepared()

        async with anyio.create_task_group() as task_group:
            for index in range(len(batches)):
                task_group.start_soon(prepare, index)
    finally:
        await worker.aclose()
    for index, batch in enumerate(batches):
        assert entry_view(results[index]) == entry_view(sketcher.prepare(batch))


@pytest.mark.anyio
async def test_a_worker_started_before_the_imports_is_the_one_used() -> None:
    # the command starts its worker first thing (_launch); the pipeline's
    # first SketchProcess.start takes it instead of starting another
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    records = mixed_lines()
    started = _launch._prestart_worker(["replay", "in.jsonl", "--sketch-processes", "1"])
    assert started is not None
    process, connection = started
    _workers.hand_over(process, connection)
    before = set(children(os.getpid()))
    worker = await SketchProcess.start(sketcher)
    try:
        assert process.pid in before and set(children(os.getpid())) == before  # no other child started
        there = (await worker.prepare(records)).prepared()
    finally:
        await worker.aclose()
    assert entry_view(there) == entry_view(sketcher.prepare(records))
    assert process.poll() is not None  # closed with its worker, not left running
    assert not _workers._handed_over


def test_a_workers_answer_carries_its_arrays_as_bytes_beside_the_pickle() -> None:
    # every array column of a batch's sketches (times, flags, offsets, keys,
    # shingle and word hashes) crosses as an out-of-band buffer: read in
    # place, never copied into and out of the pickle
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    records = mixed_lines()
    wire = sketcher.prepare_wire(records)
    whole = _protocol.frame(("ok", wire))
    body = whole[_protocol.FRAME_HEADER.size :]
    assert _protocol.FRAME_HEADER.unpack_from(whole)[0] == len(body)
    status, sent = _protocol.from_frame(body)
    assert status == "ok"
    arrays = [value for value in sent if isinstance(value, np.ndarray)]
    columns = sketcher.prepare(records).sketches.columns()
    assert len(arrays) == 9 == sum(isinstance(column, np.ndarray) for column in columns)
    for array in arrays:
        assert len(array) and not array.flags.writeable
        assert np.shares_memory(array, np.frombuffer(body, dtype=np.uint8))
    pickled = body[4 + 8 * len(arrays) + sum(array.nbytes for array in arrays) :]
    for array in arrays[-5::2]:  # the keys, shingles and words: in the buffers, and not in the pickle after them
        assert body.count(array.tobytes()) == 1 and array.tobytes() not in pickled
    there = PreparedBatch.from_wire(sent, records)
    assert entry_view(there) == entry_view(sketcher.prepare(records))


@pytest.mark.anyio
async def test_a_worker_started_early_that_died_is_replaced() -> None:
    sketcher = Sketcher(FilterConfig(seed=1), record_adapter("auto"))
    started = _launch._prestart_worker(["replay", "in.jsonl"])
    assert started is not None
    process, connection = started
    process.kill()
    process.wait()
    _workers.hand_over(process, connection)
    worker = await SketchProcess.start(sketcher)  # a new child, started the usual way
    try:
        there = (await worker.prepare(mixed_lines()[:50])).prepared()
    finally:
        await worker.aclose()
    assert entry_view(there) == entry_view(sketcher.prepare(mixed_lines()[:50]))


def test_a_worker_started_early_and_never_used_is_ended() -> None:
    # a replay that fails before its pipeline runs (a bad --db, say)
    started = _launch._prestart_worker(["replay", "in.jsonl"])
    assert started is not None
    _workers.hand_over(*started)
    _workers.close_unused()
    assert started[0].poll() is not None and not _workers._handed_over


def test_a_worker_whose_parent_closes_its_end_runs_its_exit_handlers_and_ends() -> None:
    # It ends without the interpreter's teardown, which its parent would wait
    # for; what an exit handler or a stray print leaves is still written.
    ours, theirs = socket.socketpair()
    code = (
        "import atexit; atexit.register(lambda: print('handler ran')); print('buffered', end=''); "
        f"from streamfilter._serve import serve_socket; serve_socket({theirs.fileno()})"
    )
    with ours, theirs:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", code],
            pass_fds=(theirs.fileno(),),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out == b"bufferedhandler ran\n"


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["replay", "a.jsonl"], True),
        (["replay", "a.jsonl", "--sketch-processes", "2"], True),
        (["replay", "a.jsonl", "--sketch-processes", "0"], False),
        (["replay", "--sketch-processes=0", "a.jsonl"], False),
        (["replay", "--help"], False),
        (["follow", "wss://example"], False),
        (["params", "--threshold", "0.5"], False),
        ([], False),
    ],
)
def test_only_a_replay_that_sketches_in_a_worker_starts_one_early(argv: list[str], wanted: bool) -> None:
    assert _launch._wants_worker(argv) == (wanted and len(os.sched_getaffinity(0)) > 1)


def test_a_replay_of_a_small_file_starts_no_worker(tmp_path: Path) -> None:
    small, large, packed = tmp_path / "small.jsonl", tmp_path / "large.jsonl", tmp_path / "packed.jsonl.gz"
    small.write_bytes(b"x" * (_protocol.SMALL_INPUT_BYTES // 2))
    large.write_bytes(b"x" * _protocol.SMALL_INPUT_BYTES)
    packed.write_bytes(b"x" * (_protocol.SMALL_INPUT_BYTES // 4))  # counted 8 times: about 2 MB of lines
    spare = len(os.sched_getaffinity(0)) > 1
    cases = [
        (["replay", str(small)], False),
        (["replay", str(small), "--db", str(large)], False),  # an option's value is no input
        (["replay", "--resume", str(small), "--out", str(large)], False),
        (["replay", str(small), str(small)], True),  # 1 MB in all
        (["replay", str(large)], True),
        (["replay", str(packed)], True),
        (["replay", str(small), "-"], True),  # stdin: no size to go by
        (["replay", "--db", str(tmp_path)], True),
        (["replay", str(tmp_path)], True),  # not a file: the replay reports it
        (["replay", "--res", str(small)], True),  # an abbreviation: left to the parser
        (["replay", str(small), "--sketch-processes", "1"], True),
    ]
    for argv, wanted in cases:
        assert _launch._wants_worker(argv) == (wanted and spare), argv
    config = cli_parser.config_of(cli_parser.build_parser().parse_args(["replay", str(small)]), None)
    assert config.sketch_processes == 0
    config = cli_parser.config_of(cli_parser.build_parser().parse_args(["replay", str(large)]), None)
    assert config.sketch_processes is None  # the default: one per spare core


def test_the_launcher_knows_every_replay_option() -> None:
    parser = cli_parser.build_parser()
    replay = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["replay"]
    flags = {name for a in replay._actions if a.nargs == 0 for name in a.option_strings}
    options = {name for a in replay._actions if a.option_strings and a.nargs != 0 for name in a.option_strings}
    assert (flags, options) == (set(_launch._REPLAY_FLAGS), set(_launch._REPLAY_OPTIONS))


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def wait_for_child(process: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        found = children(process.pid)
        if found:
            return found[0]
        time.sleep(0.01)
    pytest.fail("the replay started no worker process")


needs_proc = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads children from /proc")


def verdict_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def start_replay(
    stream: Path, db: Path, verdicts: Path, processes: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    command = replay(str(stream), "--db", str(db), "--verdicts", str(verdicts), "--out", os.devnull,
                     "--sketch-processes", processes, *args)  # fmt: skip
    return subprocess.Popen(command, stderr=subprocess.PIPE, env=env)


def finish(process: subprocess.Popen[bytes]) -> str:
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr.decode()
    return stderr.decode()


def in_process_verdicts(stream: Path, tmp_path: Path) -> list[dict[str, object]]:
    verdicts = tmp_path / "in-process.jsonl"
    finish(start_replay(stream, tmp_path / "in-process", verdicts, "0"))
    return verdict_lines(verdicts)


def printed_by_python(code: str) -> list[str]:
    """The lines a new Python process running ``code`` prints; it must succeed."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_a_worker_imports_nothing_of_the_parents_side() -> None:
    # It starts beside the command's own imports: what it loads delays its first answer.
    check = (
        "import sys; from streamfilter._serve import serve_socket; "
        "print(sorted(m for m in ('anyio', 'asyncio', 'lmdb', 'streamfilter.stores.lmdb', "
        "'streamfilter.stores.redis', 'streamfilter._workers') if m in sys.modules))"
    )
    assert printed_by_python(check) == ["[]"]


def test_the_command_and_its_workers_ask_openblas_for_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenBLAS starts a spinning thread per core at numpy's import, CPU the
    # replay's processes need; the user's own choice stands.
    monkeypatch.delenv(_protocol.BLAS_THREADS_VARIABLE, raising=False)
    assert _protocol.worker_environment()[_protocol.BLAS_THREADS_VARIABLE] == "1"
    monkeypatch.setenv(_protocol.BLAS_THREADS_VARIABLE, "3")
    assert _protocol.worker_environment()[_protocol.BLAS_THREADS_VARIABLE] == "3"
    check = (
        "import atexit, os, sys; os.environ.pop('OPENBLAS_NUM_THREADS', None); "
        "sys.argv = ['streamfilter', '--version']; from streamfilter import _launch; "
        "atexit.register(lambda: print('blas', os.environ.get('OPENBLAS_NUM_THREADS'))); _launch.run()"
    )
    assert printed_by_python(check)[-1] == "blas 1"


def test_the_commands_own_process_does_not_load_the_emoji_data() -> None:
    # Its imports are on the critical path of every command: the emoji data
    # (30-40 ms with the table) is loaded when a post first needs it.
    check = "import sys; from streamfilter import cli, _workers; print('emoji' in sys.modules)"
    assert printed_by_python(check) == ["False"]


def test_a_worker_imports_this_package_not_a_folder_named_like_it(tmp_path: Path) -> None:
    # run from a directory holding a decoy streamfilter/ (an unpacked data
    # set, a checkout): the command and its worker import the installed package
    command = shutil.which("streamfilter", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("no streamfilter command beside this Python")
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=15000, copies=1)
    marker = tmp_path / "decoy-imported"
    decoy = tmp_path / "here" / "streamfilter"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('a decoy')\n")
    (decoy / "_serve.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    verdicts = tmp_path / "v.jsonl"
    done = subprocess.run(
        [command, "replay", str(stream), "--db", str(tmp_path / "db"), "--verdicts", str(verdicts),
         "--sketch-processes", "1", "--out", os.devnull],
        cwd=decoy.parent, capture_output=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"worker" not in done.stderr  # none lost, none failed to start
    assert not marker.exists()
    assert len(verdicts.read_bytes().splitlines()) == 15000


@needs_proc
def test_replay_with_workers_gives_the_verdicts_of_one_process(tmp_path: Path) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=12000, copies=2)
    verdicts = tmp_path / "v.jsonl"
    process = start_replay(stream, tmp_path / "db", verdicts, "2", "--batch-size", "128")
    wait_for_child(process)
    finish(process)
    expected = in_process_verdicts(stream, tmp_path)
    assert len(expected) == 24000
    assert verdict_lines(verdicts) == expected  # same verdicts, in input order


@needs_proc
def test_a_killed_worker_costs_no_verdict(tmp_path: Path) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=25000, copies=2)
    verdicts = tmp_path / "v.jsonl"
    process = start_replay(stream, tmp_path / "db", verdicts, "1", "--batch-size", "256")
    worker = wait_for_child(process)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (verdicts.exists() and verdicts.stat().st_size):
        time.sleep(0.01)  # until batches are judged: the worker is taking them
    os.kill(worker, signal.SIGKILL)
    # lost mid-batch ("a sketch worker process was lost") or, on a slow machine, while starting
    assert "worker process" in finish(process)
    assert verdict_lines(verdicts) == in_process_verdicts(stream, tmp_path)


@needs_proc
def test_a_killed_replay_leaves_no_worker_behind(tmp_path: Path) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=40000, copies=1)
    process = start_replay(stream, tmp_path / "db", tmp_path / "v.jsonl", "2")
    worker = wait_for_child(process)
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{worker}/stat").read_text().split(")")[-1].split()[0]
        if state == "Z":  # exited; only its (re-parented) entry remains to be reaped
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{worker}").exists(), "the worker outlived its killed replay by 10 s"


@needs_proc
def test_ctrl_c_to_the_process_group_stops_cleanly_with_workers(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches every process in its group; workers run in
    their own session, so only the replay sees it, finishes its batch and exits 130."""
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=50000, copies=1)
    out = tmp_path / "out.jsonl"
    db = tmp_path / "db"
    process = subprocess.Popen(
        replay(str(stream), "--db", str(db), "--out", str(out), "--batch-size", "256", "--sketch-processes", "2"),
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, as a shell job would be
    )
    wait_for_child(process)
    while process.poll() is None and not (out.exists() and out.stat().st_size):
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr.decode()
    assert "Traceback" not in stderr.decode()
    subprocess.run(replay(str(stream), "--db", str(db), "--out", str(out), "--resume"), check=True, timeout=300)
    assert sorted(out.read_text().splitlines()) == sorted(stream.read_text().splitlines())


@needs_proc
def test_a_worker_stopped_and_continued_mid_answer_loses_nothing(tmp_path: Path) -> None:
    """SIGSTOP/SIGCONT (a debugger, a frozen container) can cut a pipe write
    short; with PYTHONUNBUFFERED set, as in many containers, an unchecked raw
    write then lost the rest of an answer and the replay hung for good."""
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=12000, copies=2)
    verdicts = tmp_path / "v.jsonl"
    unbuffered = dict(os.environ, PYTHONUNBUFFERED="1")
    process = start_replay(stream, tmp_path / "db", verdicts, "1", "--batch-size", "1024", env=unbuffered)
    worker = wait_for_child(process)
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        try:
            os.kill(worker, signal.SIGSTOP)
            time.sleep(0.002)
            os.kill(worker, signal.SIGCONT)
        except ProcessLookupError:
            break  # the worker is done; the replay is finishing
        time.sleep(0.003)
    try:
        process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("the replay hung with its worker stopped and continued")
    finish(process)
    assert verdict_lines(verdicts) == in_process_verdicts(stream, tmp_path)


def test_a_worker_more_starts_only_where_sketching_holds_the_replay_back() -> None:
    assert _pipeline.sketch_bound(slot_waits=0.8, store_busy=0.3, elapsed=1.0)  # long texts, an idle store
    assert not _pipeline.sketch_bound(slot_waits=0.8, store_busy=0.7, elapsed=1.0)  # the store is busy too
    assert not _pipeline.sketch_bound(slot_waits=0.2, store_busy=0.1, elapsed=1.0)  # the workers keep up


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the workers' protocol is tested on both elsewhere
async def test_a_worker_started_mid_stream_changes_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=3000, copies=2)  # 6,000 lines, in chunks of 500
    lines = stream.read_bytes().splitlines()

    started: list[object] = []
    grown = anyio.Event()
    start = _workers.SketchProcess.start

    async def counted(sketcher: object) -> _workers.SketchProcess:
        started.append(sketcher)
        worker = await start(sketcher)  # type: ignore[arg-type]
        if len(started) == 2:
            grown.set()
        return worker

    async def chunks(wait: bool) -> AsyncGenerator[list[Any] | int, None]:
        for at in range(0, len(lines), 500):
            if wait and at == len(lines) // 2:  # the second half once the second worker has started
                with anyio.fail_after(60):
                    await grown.wait()
            yield lines[at : at + 500]

    async def judged(path: Path, wait: bool) -> list[tuple[str, str | None]]:
        async with StreamFilter(FilterConfig(seed=2, batch_size=128), path=path) as sf:
            batches = sf.judge_batches(Chunks(chunks(wait)))
            return [(v.kind.value, v.duplicate_of) async for batch in batches for v in batch]

    monkeypatch.setattr(_pipeline, "default_sketch_processes", lambda: 0)
    monkeypatch.setattr(_pipeline, "most_sketch_processes", lambda: 0)
    expected = await judged(tmp_path / "here", wait=False)
    monkeypatch.setattr(_workers.SketchProcess, "start", counted)
    monkeypatch.setattr(_pipeline, "default_sketch_processes", lambda: 1)
    monkeypatch.setattr(_pipeline, "most_sketch_processes", lambda: 2)
    monkeypatch.setattr(_pipeline, "_LOOK_SECONDS", 0.001)
    monkeypatch.setattr(_pipeline, "sketch_bound", lambda *_: True)
    assert await judged(tmp_path / "grown", wait=True) == expected
    assert len(started) == 2  # the first worker, then one more mid-stream


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(("workers", "held_back"), [(1, True), (1, False), (2, True)])
async def test_the_command_sketches_beside_one_worker_while_the_sketching_holds_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, held_back: bool
) -> None:
    # beside one worker, when the batches wait for a sketch slot and the
    # store stage idles, the command's process takes batches too; when the
    # store stage is busy, or beside two workers, it leaves them the sketching
    stream = tmp_path / "stream.jsonl"
    make_stream(stream, distinct=1500, copies=2)
    lines = stream.read_bytes().splitlines()
    started, looked = anyio.Event(), anyio.Event()
    live: list[object] = []
    here_after_start: list[int] = []
    start, prepare = _workers.SketchProcess.start, _pipeline._Local.prepare

    async def counted_start(sketcher: object) -> _workers.SketchProcess:
        worker = await start(sketcher)  # type: ignore[arg-type]
        live.append(worker)
        if len(live) == workers:
            started.set()
        return worker

    async def counted_prepare(self: _pipeline._Local, records: list[tuple[int, Any]]) -> PreparedBatch:
        if started.is_set():
            here_after_start.append(len(records))
        return await prepare(self, records)

    def sketch_bound(*_: float) -> bool:
        if started.is_set():
            looked.set()
        return held_back

    async def chunks() -> AsyncGenerator[list[Any] | int, None]:
        with anyio.fail_after(60):
            await started.wait()  # every line once the workers run,
            await looked.wait()  # and the command has looked at its load
        for at in range(0, len(lines), 100):
            yield lines[at : at + 100]

    monkeypatch.setattr(_workers.SketchProcess, "start", counted_start)
    monkeypatch.setattr(_pipeline._Local, "prepare", counted_prepare)
    monkeypatch.setattr(_pipeline, "sketch_bound", sketch_bound)
    monkeypatch.setattr(_pipeline, "_LOCAL_LOOK_SECONDS", 0.001)
    monkeypatch.setattr(_pipeline, "default_sketch_processes", lambda: workers)
    monkeypatch.setattr(_pipeline, "most_sketch_processes", lambda: workers)
    async with StreamFilter(FilterConfig(seed=2, batch_size=64), path=tmp_path / "index") as sf:
        judged = [v async for batch in sf.judge_batches(Chunks(chunks())) for v in batch]
    assert len(judged) == len(lines)
    # the first batch's slot was taken while the workers started
    if workers == 1 and held_back:
        assert len(here_after_start) >= 3  # of 47 batches, in turns with the worker's two slots
    else:
        assert len(here_after_start) <= 1


def test_a_replay_with_a_worker_builds_no_post_sketch_match_or_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the batch is columns from the worker's answer to the verdict lines:
    # the command's process builds no Verdict, on a stream with duplicates,
    # reposts and a delete notice (which cuts a batch in two), and a Post
    # only where it sketches a batch itself (beside its one worker), once a
    # post; and where the kernel judges, no Sketch and no Match (the
    # Python reference judge reads one post at a time)
    from streamfilter._compiled import compiled_kernel
    from streamfilter._post import Post, Verdict
    from streamfilter._values import Match, Sketch
    from streamfilter.cli import main

    built: dict[str, int] = {}
    for kind in (Post, Verdict, Match, Sketch):
        original = kind.__init__

        def counted(self: Any, *args: Any, _name: str = kind.__name__, _init: Any = original, **kwargs: Any) -> None:
            built[_name] = built.get(_name, 0) + 1
            _init(self, *args, **kwargs)

        monkeypatch.setattr(kind, "__init__", counted)
    verdicts = tmp_path / "verdicts.jsonl"
    argv = ["replay", str(FIXTURES / "campaign.jsonl"), str(FIXTURES / "bluesky_jetstream.jsonl")]
    assert main([*argv, "--db", str(tmp_path / "index"), "--sketch-processes", "1", "--verdicts", str(verdicts),
                 "--out", str(tmp_path / "out.jsonl"), "-q"]) == 0  # fmt: skip
    kinds = [json.loads(line)["verdict"] for line in verdicts.read_text().splitlines()]
    assert {"novel", "duplicate", "skipped"} <= set(kinds)
    posts = built.pop("Post", 0)
    assert posts <= len(kinds) - kinds.count("skipped") - kinds.count("invalid")
    if compiled_kernel() is None:
        assert built.pop("Sketch") and built.pop("Match")
    assert built == {}
    Match("p", 1.0)  # the counting itself works
    assert built == {"Match": 1}
