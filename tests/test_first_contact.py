"""What a new user meets in the first minutes: version, quiet runs, usage
errors with suggestions, byte-for-byte output, refused settings, secrets
kept out of messages."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streamfilter._redact import redact

from .conftest import FIXTURES, replay_command


def streamfilter(*args: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "streamfilter", *args], capture_output=True, timeout=120, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_kernel_mode(flag: str) -> None:
    done = streamfilter(flag)
    mode = "pure" if os.environ.get("STREAMFILTER_PURE", "") not in ("", "0") else "compiled"
    assert done.returncode == 0 and re.fullmatch(rf"streamfilter 0\.\S+ \({mode}\)\n", done.stdout.decode())
    pure = streamfilter(flag, env={**os.environ, "STREAMFILTER_PURE": "1"})
    assert pure.stdout.decode().endswith(" (pure)\n") and pure.stderr == b""  # chosen: nothing to say


def test_a_source_tree_without_its_kernel_says_so_once(tmp_path: Path) -> None:
    # a checkout that was never built: the pure references run, and the
    # command says once how to build the kernel, unless the references were chosen
    package = Path(__file__).resolve().parent.parent / "streamfilter"
    shutil.copytree(package, tmp_path / "streamfilter", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    # an editable install's finder would find the kernel of this checkout for the copy: without it
    unfound = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]"
    argv = [sys.executable, "-P", "-c", f"{unfound}; from streamfilter.cli import main; main(['--version'])"]
    environment = {**os.environ, "PYTHONPATH": str(tmp_path)}
    environment.pop("STREAMFILTER_PURE", None)
    done = subprocess.run(argv, capture_output=True, timeout=120, env=environment)
    assert done.returncode == 0 and done.stdout.decode().endswith(" (pure)\n")
    stderr = done.stderr.decode()
    assert stderr.count("not built") == 1 and "`pip install -e .`" in stderr and str(tmp_path) in stderr
    chosen = subprocess.run(argv, capture_output=True, timeout=120, env={**environment, "STREAMFILTER_PURE": "1"})
    assert chosen.stdout.decode().endswith(" (pure)\n") and chosen.stderr == b""


def test_quiet_replay_prints_nothing_but_its_output(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_text('{"id": "1", "text": "one post here"}\n{"id": "2"}\n')
    done = subprocess.run(replay_command("-q", str(stream)), capture_output=True, timeout=120)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout == b'{"id": "1", "text": "one post here"}\n'
    loud = subprocess.run(replay_command(str(stream)), capture_output=True, timeout=120)
    assert (
        b"s.jsonl:2: invalid: no text field: tried text" in loud.stderr
        and b"2 posts, 1 novel, 0 duplicates" in loud.stderr
    )


def test_a_misspelt_option_gets_the_subcommands_usage_and_a_suggestion() -> None:
    done = streamfilter("replay", "--treshold", "0.5", "x.jsonl")
    stderr = done.stderr.decode()
    assert done.returncode == 2
    assert "usage: streamfilter replay" in stderr
    assert "unrecognized arguments: --treshold (did you mean --threshold?)" in stderr
    after = streamfilter("replay", "x.jsonl", "--treshold", "0.5").stderr.decode()
    assert "unrecognized arguments: --treshold 0.5 (did you mean --threshold?)" in after  # the value where it was


def test_out_is_byte_for_byte_crlf_included(tmp_path: Path) -> None:
    stream = tmp_path / "crlf.jsonl"
    data = b'{"id":"c1","text":"carriage return line one"}\r\n{"id":"c2","text":"another different line"}\r\n'
    stream.write_bytes(data)
    subprocess.run(replay_command(str(stream), "--out", str(tmp_path / "out")), check=True, capture_output=True)
    assert (tmp_path / "out").read_bytes() == data


def test_a_threshold_that_would_change_the_split_of_an_index_is_refused(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_text('{"id": "1", "text": "one post here to build the index"}\n')
    index = str(tmp_path / "index")
    subprocess.run(replay_command(str(stream), "--db", index, "--threshold", "0.9"), check=True, capture_output=True)
    done = subprocess.run(replay_command(str(stream), "--db", index, "--threshold", "0.3"), capture_output=True)
    assert done.returncode == 2 and b"a split cannot change in place" in done.stderr
    same = subprocess.run(replay_command(str(stream), "--db", index, "--threshold", "0.9"), capture_output=True)
    assert same.returncode == 0, same.stderr


@pytest.mark.parametrize(
    "url",
    [
        "http://user:SECRETPW@[::1/x?token=T0KEN",  # urlsplit refuses it
        "https://user:SECRETPW@host/x?jwt=T0KEN&bearer=T0KEN",
        "wss://SECRETPW@host/x?access_token=T0KEN",
        "http://127.0.0.1:9/x?a=1#access_token=T0KEN&session=SECRETPW",  # OAuth's implicit flow: the fragment
        "https://host/x#id_token=T0KEN",
        "https://host/stream;jsessionid=T0KEN?x=1",  # a path parameter
        "https://host/a;b=1/stream;JSESSIONID=T0KEN",
        "https://host/x#T0KEN",  # a fragment that names nothing
        "http://u:pw@[::1/x;session=T0KEN",
        "http://[::1/x#T0KEN",  # urlsplit refuses it, and its fragment names nothing
        "http://[::1/x#state=1&access_token=T0KEN",
    ],
)
def test_secrets_never_reach_a_message(url: str) -> None:
    shown = redact(url)
    assert "SECRETPW" not in shown and "T0KEN" not in shown
    for command in (["follow", url, "--max-retries", "0"], ["replay", "--store", url]):
        done = streamfilter(*command, input=b"")
        assert done.returncode in (1, 2)
        assert b"SECRETPW" not in done.stderr and b"T0KEN" not in done.stderr and b"unexpected" not in done.stderr


def test_a_header_with_a_control_character_is_refused_once_and_not_shown() -> None:
    done = streamfilter("follow", "http://127.0.0.1:9/x", "--header", "Authorization: Bearer SECRET\x01X")
    assert done.returncode == 2 and b"control character" in done.stderr and b"SECRET" not in done.stderr


def test_mastodon_streaming_updates_go_out_as_their_statuses(tmp_path: Path) -> None:
    status = {"id": "m1", "created_at": "2024-05-01T00:00:00.000Z", "content": "<p>hello there friends</p>"}
    stream = tmp_path / "m.jsonl"
    stream.write_text(json.dumps({"event": "update", "payload": json.dumps(status)}) + "\n")
    subprocess.run(replay_command(str(stream), "--out", str(tmp_path / "out")), check=True, capture_output=True)
    assert json.loads((tmp_path / "out").read_bytes()) == status


def test_resume_on_a_replaced_shorter_input_says_so_and_fails(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    lines = [json.dumps({"id": str(n), "text": f"post number {n} with words w{n}"}) for n in range(20)]
    stream.write_text("\n".join(lines) + "\n")
    index = str(tmp_path / "index")
    subprocess.run(replay_command(str(stream), "--db", index, "--out", "/dev/null"), check=True, capture_output=True)
    stream.write_text("\n".join(lines[:5]) + "\n")  # replaced by a shorter file
    done = subprocess.run(replay_command(str(stream), "--db", index, "--resume"), capture_output=True, timeout=120)
    assert done.returncode == 1
    assert b"recorded 20 lines of it as done, but it has only 5" in done.stderr
    stream.write_text("\n".join(lines) + "\n")  # the same file again: nothing left to do, and no complaint
    again = subprocess.run(replay_command(str(stream), "--db", index, "--resume"), capture_output=True, timeout=120)
    assert again.returncode == 0 and b"error" not in again.stderr and again.stdout == b""


def test_an_unknown_redis_host_fails_at_once_and_says_so(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_text('{"id": "1", "text": "one post"}\n')
    done = subprocess.run(
        replay_command(str(stream), "--store", "redis://no-such-host.invalid:6379/0"), capture_output=True, timeout=60
    )
    assert done.returncode == 1 and b"no such host" in done.stderr and b"committed batches" not in done.stderr


def test_usage_errors_come_before_any_work(tmp_path: Path) -> None:
    both = streamfilter("replay", "fixtures/campaign.jsonl", "--verdicts", "-", cwd=Path(__file__).parent.parent)
    assert both.returncode == 2 and b"would both go to stdout" in both.stderr
    follow = streamfilter("follow", "ftp://example.org/x")
    assert follow.returncode == 2 and b"posts," not in follow.stderr  # no summary of nothing
    (tmp_path / "dir").mkdir()
    report = streamfilter("report", "x.jsonl", "--verdicts", "v.jsonl", "--html", str(tmp_path / "dir"))
    assert report.returncode == 2 and b"is a directory" in report.stderr


def test_params_names_what_it_measures_and_the_threshold_it_assumed() -> None:
    done = streamfilter("params", "--fn-rate", "0.05", "--fn-at", "0.7", "--fp-rate", "0.3", "--fp-at", "0.3")
    out = done.stdout.decode()
    assert "false-positive" not in out and "use --threshold 0.7 --num-perm" in out


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (True, "id field id is a bool (True), not a string or an integer"),
        (False, "id field id is a bool (False), not a string or an integer"),
        ("", "id field id is an empty string"),
        (" \t", "id field id is a blank string"),
        (1.0, "id field id is a float (1.0), not a string or an integer"),
        (1e17, "id field id is a float (1e+17), not a string or an integer"),
    ],
)
def test_an_id_that_is_not_an_id_is_invalid_with_its_reason(value: object, reason: str) -> None:
    from streamfilter import StreamFilter

    with StreamFilter() as sf:
        verdict = sf.check({"id": value, "text": "a post whose id is not an id at all"})
        kept = sf.check({"id": 7, "text": "a post whose id is an integer, which is fine"})
    assert (verdict.kind.value, verdict.reason) == ("invalid", reason)
    assert (kept.kind.value, kept.post.id if kept.post else None) == ("novel", "7")


def test_resume_with_no_index_behind_earlier_output_is_refused_and_appends_nothing(tmp_path: Path) -> None:
    out = tmp_path / "novel.jsonl"
    out.write_text("earlier output\n")
    missing = str(tmp_path / "no-such-index")
    command = replay_command(str(FIXTURES / "campaign.jsonl"), "--db", missing, "--out", str(out), "--resume")
    done = subprocess.run(command, capture_output=True, timeout=120)
    assert done.returncode == 2 and b"there is no index at" in done.stderr
    assert out.read_text() == "earlier output\n" and not Path(missing).exists()
    out.unlink()  # a first run, with nothing written before it, may say --resume: it starts the index
    assert subprocess.run(command, capture_output=True, timeout=120).returncode == 0 and out.read_text()


def test_records_dated_by_datetime_values_are_judged_in_their_time() -> None:
    from datetime import datetime, timedelta, timezone

    import numpy as np

    from streamfilter import StreamFilter

    text = "win a free cruise today for two, just for following us"
    with StreamFilter() as sf:
        first = sf.check({"id": "1", "text": text, "created_at": datetime(2024, 5, 1, 12, tzinfo=UTC)})
        # naive: read as UTC; the same instant in another zone; numpy's datetime64
        naive = sf.check({"id": "2", "text": text, "created_at": datetime(2024, 5, 1, 12, 0, 5)})
        zoned = sf.check(
            {"id": "3", "text": text, "created_at": datetime(2024, 5, 1, 14, tzinfo=timezone(timedelta(hours=2)))}
        )
        numpy = sf.check({"id": "4", "text": text, "created_at": np.datetime64("2024-05-01T12:00:09")})
        nat = sf.check({"id": "5", "text": text, "created_at": np.datetime64("NaT")})
    assert [v.kind.value for v in (first, naive, zoned, numpy)] == ["novel", "duplicate", "duplicate", "duplicate"]
    assert [v.post.timestamp if v.post else None for v in (first, naive, zoned, numpy)] == [
        1714564800.0,
        1714564805.0,
        1714564800.0,
        1714564809.0,
    ]
    assert nat.kind.value == "invalid" and nat.reason is not None and nat.reason.endswith("is no point in time")


def test_a_pandas_frame_s_rows_are_records() -> None:
    pd = pytest.importorskip("pandas")
    from streamfilter import StreamFilter

    frame = pd.DataFrame(
        {
            "id": ["1", "2", "3"],
            "text": ["win a free cruise today for two", "win a FREE cruise today for two!!", "flight delayed again"],
            "created_at": pd.to_datetime(["2024-05-01T12:00:00Z", "2024-05-01T12:00:05Z", "2024-05-01T12:00:09Z"]),
        }
    )
    with StreamFilter() as sf:
        kinds = [v.kind.value for v in sf.check_many(frame.to_dict("records"))]
    assert kinds == ["novel", "duplicate", "novel"]


def test_a_pandas_frame_judged_a_row_at_a_time_keeps_its_numpy_ids_and_times() -> None:
    # apply(axis=1) and iterrows give each row as a Series, whose integer
    # columns hold numpy's int64, not int: ids and epoch times as the frame holds them
    pd = pytest.importorskip("pandas")
    from streamfilter import StreamFilter

    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "text": ["win a free cruise today for two", "win a FREE cruise today for two!!", "flight delayed again"],
            "created_at": [1714564800, 1714564805, 1714564809],
        }
    )
    with StreamFilter() as sf:
        applied = frame.apply(sf.is_novel, axis=1).tolist()
    with StreamFilter() as sf:
        verdicts = [sf.check(row) for _, row in frame.iterrows()]
    assert applied == [True, False, True]
    assert [(v.kind.value, v.post_id, v.duplicate_of) for v in verdicts] == [
        ("novel", "1", None),
        ("duplicate", "2", "1"),
        ("novel", "3", None),
    ]
    assert [v.post.timestamp for v in verdicts if v.post is not None] == [1714564800.0, 1714564805.0, 1714564809.0]
    assert verdicts[0].post is not None and verdicts[0].post.raw is not None and verdicts[0].post.raw["id"] == 1


def test_a_polars_frame_s_rows_are_records() -> None:
    pl = pytest.importorskip("polars")
    from streamfilter import StreamFilter

    frame = pl.DataFrame(
        {
            "id": ["1", "2", "3"],
            "text": ["win a free cruise today for two", "win a FREE cruise today for two!!", "flight delayed again"],
            "created_at": [datetime(2024, 5, 1, 12, 0, second, tzinfo=UTC) for second in (0, 5, 9)],
        }
    )
    with StreamFilter() as sf:
        verdicts = sf.check_many(frame.iter_rows(named=True))
    assert [v.kind.value for v in verdicts] == ["novel", "duplicate", "novel"]
    assert [v.post.timestamp for v in verdicts if v.post is not None] == [1714564800.0, 1714564805.0, 1714564809.0]


@pytest.mark.parametrize("command", ["replay", "follow", "consume", "report", "params"])
def test_each_commands_help_ends_with_examples_it_accepts(command: str) -> None:
    import shlex

    from streamfilter.cli._parser import build_parser

    parser = build_parser()
    done = streamfilter(command, "--help")
    examples = done.stdout.decode().split("examples:\n", 1)[1].splitlines()
    assert 2 <= len(examples) <= 3
    for example in examples:
        words = shlex.split(example.split(" > ")[0])
        assert words[:2] == ["streamfilter", command]
        parser.parse_args(words[1:])  # every option it names is one of the command's
