"""The command line's arguments: the parser, its value types, and the FilterConfig they describe."""

from __future__ import annotations

import argparse
import difflib
from typing import Any

from .._config import FilterConfig, parse_duration
from .._exceptions import ConfigError
from .._post import RetweetPolicy
from .._protocol import small_input

__all__ = ["SIMILARITIES", "UsageError", "build_parser", "config_of"]

SIMILARITIES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class UsageError(Exception):
    pass


# -- argument parsing ------------------------------------------------------------
def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Help(argparse.HelpFormatter):
    """argparse's help, with a command's examples (its epilog) kept line by line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse, with a "did you mean" for a misspelt option, and the usage of
    the subcommand where the mistake was made (argparse gives the top level's)."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self._subcommand(parsed)
            where = command if command is not None else self
            options = [o for action in where._actions for o in action.option_strings if o.startswith("--")]
            hints = []  # the user's words as given, then what they may have meant
            for word in unknown:
                name = word.split("=", 1)[0]
                close = difflib.get_close_matches(name, options, n=1, cutoff=0.6) if name.startswith("-") else []
                hints += close
            meant = f" (did you mean {', '.join(hints)}?)" if hints else ""
            where.error(f"unrecognized arguments: {' '.join(unknown)}{meant}")
        return parsed

    def _subcommand(self, parsed: argparse.Namespace) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(parsed, "command", None) or "")
        return None


def _version() -> str:
    from importlib import metadata  # here: slow to load, and for --version only

    try:
        return metadata.version("streamfilter")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``, its version read only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from .._compiled import kernel_mode

        print(f"streamfilter {_version()} ({kernel_mode()})")  # to stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="streamfilter",
        description="Filter near-duplicate posts out of social-media streams.",
    )
    parser.add_argument("-V", "--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)

    replay = commands.add_parser(
        "replay",
        epilog="""examples:
  streamfilter replay fixtures/campaign.jsonl --verdicts verdicts.jsonl > novel.jsonl
  streamfilter replay day1.jsonl.gz day2.jsonl.gz --db index --out novel.jsonl --resume
  streamfilter replay posts.jsonl --format twitter --ttl 24h --threshold 0.6 --seed 1""",
        formatter_class=_Help,
        help="replay JSON Lines (or text) files through the filter",
        description="Replay recorded streams; novel posts go to --out, one verdict per post to --verdicts.",
    )
    replay.add_argument("inputs", nargs="*", metavar="INPUT", help="JSON Lines files (.gz too) or -; none means stdin")
    _add_filtering(replay)
    replay.add_argument(
        "--resume",
        action="store_true",
        help="continue each input from the last batch committed to --db or --store; outputs are appended",
    )
    replay.add_argument("--no-progress", action="store_true", help="no progress line even when stderr is a terminal")
    _add_metrics(replay)
    replay.add_argument(
        "--sketch-processes",
        type=int,
        default=None,
        metavar="N",
        help="worker processes that sketch input lines beside the store stage; 0 sketches in this process "
        "(default: one per spare core, at most 2; on 2 cores, a second once sketching holds the replay back)",
    )

    follow = commands.add_parser(
        "follow",
        epilog="""examples:
  streamfilter follow https://example.org/stream --out novel.jsonl --db index
  streamfilter follow wss://jetstream2.us-east.bsky.network/subscribe --format bluesky --max-retries 10""",
        formatter_class=_Help,
        help="filter a live stream (JSON Lines over HTTP, server-sent events, WebSocket)",
        description="Follow a live stream and write its novel posts to stdout (or --out) as they come. "
        "Reconnects with backoff and jitter, resuming where the protocol allows (SSE Last-Event-ID, "
        "Jetstream cursor); connection state goes to stderr. Stop with SIGINT or SIGTERM.",
    )
    follow.add_argument(
        "url", metavar="URL", help="http(s):// for JSON Lines or server-sent events, ws(s):// for WebSocket"
    )
    _add_filtering(follow)
    follow.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header for every connection, e.g. 'Accept-Language: en' (repeatable); "
        "put tokens in --header-file or $STREAMFILTER_HEADERS instead, where ps cannot see them",
    )
    follow.add_argument(
        "--header-file",
        metavar="FILE",
        help="HTTP headers, one 'Name: value' a line (# comments), e.g. 'Authorization: Bearer TOKEN'",
    )
    follow.add_argument(
        "--max-retries",
        type=int,
        default=None,
        help="give up after this many reconnects in a row that deliver nothing (default: never)",
    )
    follow.add_argument(
        "--resume",
        action="store_true",
        help="start where the last batch committed to --db or --store for this URL left off "
        "(SSE Last-Event-ID, Jetstream cursor); outputs are appended. Without it, the stream starts now",
    )
    _add_service(follow)
    _live_batch_help(follow)
    _add_record(follow)

    consume = commands.add_parser(
        "consume",
        epilog="""examples:
  streamfilter consume "redis://localhost:6379/0?stream=posts&group=filter" --out-stream novel
  streamfilter consume "redis://localhost:6379/0?stream=posts&group=filter" --store redis://localhost:6379/1""",
        formatter_class=_Help,
        help="judge the entries of a Redis stream as one of a consumer group",
        description="Read records from a Redis stream with XREADGROUP, as one consumer of a group that any "
        "number of workers share; novel records go to --out-stream or --out, and each entry is acknowledged "
        "once its batch is committed and written (at least once). Entries a dead consumer left pending are "
        "claimed after --claim-idle. Stop with SIGINT or SIGTERM.",
    )
    consume.add_argument(
        "source",
        metavar="URL",
        help="redis://HOST:PORT/DB?stream=NAME&group=GROUP (rediss:// for TLS; a Cluster node works too)",
    )
    consume.add_argument("--consumer", help="this consumer's name in the group (default: host name and process id)")
    consume.add_argument("--field", default="data", help="the entry field holding the record (default: data)")
    consume.add_argument("--from-now", action="store_true", help="a new group starts at the stream's end ($)")
    consume.add_argument(
        "--claim-idle",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="claim entries another consumer left pending this long (default: 60s)",
    )
    consume.add_argument("--out-stream", metavar="NAME", help="XADD novel records to this stream, same field")
    _add_filtering(consume)
    _live_batch_help(consume)
    _add_record(consume)
    _add_service(consume)
    consume.set_defaults(resume=False)

    report = commands.add_parser(
        "report",
        epilog="""examples:
  streamfilter report fixtures/campaign.jsonl --verdicts verdicts.jsonl --html report.html
  streamfilter report posts.jsonl --verdicts v.jsonl --json report.json --graph accounts.gexf --top 50""",
        formatter_class=_Help,
        help="the campaigns in a replay's verdicts: clusters, timelines and charts",
        description="Read a stream with the verdicts a replay or follow run wrote for it (matched by their line) "
        "and write its clusters, a novel post and the duplicates that name it, as JSON (--json) and as one "
        "self-contained HTML page with charts (--html; needs pip install 'streamfilter[report]').",
    )
    report.add_argument("inputs", nargs="+", metavar="INPUT", help="the stream, as replay read it (.gz too)")
    report.add_argument("--verdicts", metavar="FILE", required=True, help="the verdicts replay or follow wrote")
    report.add_argument("--html", metavar="FILE", help="write the HTML report here")
    report.add_argument("--json", metavar="FILE", help="write the clusters as JSON here")
    report.add_argument(
        "--members",
        metavar="FILE",
        help="write every post of every campaign, with its text, as CSV here (the page lists the first 500)",
    )
    report.add_argument(
        "--top",
        type=_positive_int,
        default=10,
        help="the largest campaigns shown, in the HTML and the JSON (default: 10)",
    )
    report.add_argument(
        "--format", choices=("auto", "twitter", "mastodon", "bluesky", "text", "generic"), default="auto"
    )
    report.add_argument("--id-field", default="id", help="as for replay")
    report.add_argument("--text-field", default="text", help="as for replay")
    report.add_argument("--time-field", default="created_at", help="as for replay")
    report.add_argument(
        "--min-accounts",
        type=_positive_int,
        default=3,
        help="a campaign is posted by at least this many accounts (default: 3)",
    )
    report.add_argument(
        "--min-burst",
        type=_positive_int,
        default=3,
        help="a campaign has at least this many posts within --window (default: 3)",
    )
    report.add_argument(
        "--window", type=_duration, default=3600.0, metavar="DURATION", help="the burst's window (default: 1h)"
    )
    report.add_argument(
        "--co-post-window",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="two accounts posting near-duplicates this close are linked in the coordination graph (default: 60s)",
    )
    report.add_argument(
        "--graph", metavar="FILE", help="write the coordination graph as GraphML (.graphml) or GEXF (.gexf), for Gephi"
    )
    report.add_argument(
        "--hash-authors",
        action="store_true",
        help="show every handle as a token (keyed anew each run: the same account, the same token in one report) "
        "in the page, the JSON and the graph, to share a report without naming accounts",
    )
    report.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    _add_quiet(report)

    params = commands.add_parser(
        "params",
        epilog="""examples:
  streamfilter params --threshold 0.6
  streamfilter params --fn-rate 0.01 --fp-rate 0.001""",
        formatter_class=_Help,
        help="show the LSH split chosen for a threshold, or for target error rates",
        description="Without --fn-rate/--fp-rate: the split FilterConfig derives from --threshold and --num-perm. "
        "With them: the cheapest split that misses at most --fn-rate of the pairs at --fn-at and makes "
        "candidates of at most --fp-rate of the pairs at --fp-at.",
    )
    _add_tuning(params)
    params.add_argument(
        "--max-miss-rate",
        type=float,
        default=None,
        help="allowed share of missed pairs at the threshold (default: 0.02)",
    )
    params.add_argument("--fn-rate", type=float, help="allowed share of missed pairs at --fn-at, e.g. 0.01")
    params.add_argument("--fn-at", type=_threshold, help="similarity of the pairs that must be caught, e.g. 0.6")
    params.add_argument("--fp-rate", type=float, help="allowed share of candidate pairs at --fp-at, e.g. 0.2")
    params.add_argument(
        "--fp-at", type=_threshold, help="similarity of pairs that should not become candidates, e.g. 0.3"
    )
    for command in commands.choices.values():  # a command's errors show its own usage line
        command.set_defaults(command_parser=command)
    return parser


def _add_record(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="every record judged, one a line in the order judged (line breaks inside one become spaces), "
        "so that report can read the stream with --verdicts later",
    )


def _live_batch_help(parser: argparse.ArgumentParser) -> None:
    """A live command judges what has arrived whenever the last batch is done;
    --batch-size only caps that, so its help says so, not replay's."""
    for action in parser._actions:
        if "--batch-size" in action.option_strings:
            action.help = (
                "posts per store transaction at most: whatever has arrived is judged as soon as the last batch "
                f"is done, with no wait for more (default: {FilterConfig.batch_size})"
            )


def _add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only errors that end the run: no summary, progress, state or per-line reports on stderr",
    )


def _add_metrics(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at /metrics and a health check at /healthz "
        "(needs pip install 'streamfilter[metrics]')",
    )


def _add_service(parser: argparse.ArgumentParser) -> None:
    _add_metrics(parser)
    parser.add_argument(
        "--stats-interval",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="print a stats line to stderr this often; 0 for never (default: 60s)",
    )


def _add_filtering(parser: argparse.ArgumentParser) -> None:
    """Where the index lives, where verdicts go, how records are read and judged."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--db", metavar="PATH", help="LMDB index directory (default: a temporary one, removed at exit)")
    where.add_argument(
        "--store",
        metavar="URL",
        help="a shared index on Redis or Redis Cluster instead of LMDB: redis://host:6379/0[?prefix=name] "
        "(needs pip install 'streamfilter[redis]')",
    )
    parser.add_argument("--out", metavar="FILE", help="novel posts, input lines byte for byte (default: stdout)")
    parser.add_argument("--verdicts", metavar="FILE", help="one JSON verdict per post, in input order")
    parser.add_argument("--rejects", metavar="FILE", help="invalid lines, unchanged")
    parser.add_argument(
        "--format", choices=("auto", "twitter", "mastodon", "bluesky", "text", "generic"), default="auto"
    )
    parser.add_argument("--id-field", default="id", help="dotted path of the id in generic JSON (default: id)")
    parser.add_argument("--text-field", default="text", help="dotted path of the text in generic JSON (default: text)")
    parser.add_argument(
        "--time-field",
        default="created_at",
        help="dotted path of the time in generic JSON (default: created_at)",
    )
    _add_quiet(parser)
    _add_tuning(parser)
    parser.add_argument(
        "--seed",
        type=_seed,
        help="seed of the word hashes and band keys, 0 to 4294967295, for runs to compare verdict for verdict "
        "(default: a new index draws a secret one and keeps it; an existing index keeps its own)",
    )
    parser.add_argument(
        "--ttl",
        type=_duration,
        metavar="DURATION",
        help="expiry in event time: a number with s, m, h, d or w (90s, 15m, 24h, 7d, 3w), or 0 for never "
        "(default: 7d)",
    )
    parser.add_argument(
        "--retweets",
        choices=[p.value for p in RetweetPolicy],
        default=None,
        help="retweet policy (default: content)",
    )
    parser.add_argument(
        "--deletes",
        choices=("honour", "ignore"),
        default=None,
        help="a platform's delete notice (Twitter, Mastodon, Bluesky) makes the index forget that post, so a "
        "later copy is novel again (honour, the default), or is only skipped (ignore)",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=None,
        help="posts per store transaction at most; a batch is also flushed 2 ms after its first post "
        f"(default: {FilterConfig.batch_size})",
    )


def _seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 4294967295, got {text!r}")
    return seed


def _add_tuning(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=_threshold, help="Jaccard similarity that makes a duplicate (default: 0.5)")
    parser.add_argument(
        "--shingle-size",
        type=_positive_int,
        help="words per MinHash shingle, and the longest run of words verification compares (default: 2)",
    )
    parser.add_argument("--num-perm", type=_positive_int, help="MinHash permutations (default: 32)")
    parser.add_argument(
        "--bands", type=_positive_int, help="LSH bands; give --rows too (default: derived from the threshold)"
    )
    parser.add_argument("--rows", type=_positive_int, help="rows per band; bands x rows must equal --num-perm")


def config_of(args: argparse.Namespace, stored: dict[str, Any] | None) -> FilterConfig:
    settings: dict[str, Any] = {}
    if args.threshold is not None:
        settings["jaccard_threshold"] = args.threshold
    if args.shingle_size is not None:
        settings["shingle_size"] = args.shingle_size
    if args.num_perm is not None:
        settings["num_perm"] = args.num_perm
    if args.bands is not None or args.rows is not None:
        settings["bands"], settings["rows"] = args.bands, args.rows
    if getattr(args, "seed", None) is not None:
        settings["seed"] = args.seed
    if getattr(args, "ttl", None) is not None:
        settings["ttl_seconds"] = args.ttl
    if getattr(args, "retweets", None) is not None:
        settings["retweet_policy"] = RetweetPolicy(args.retweets)
    if getattr(args, "batch_size", None) is not None:
        settings["batch_size"] = args.batch_size
    if getattr(args, "deletes", None) is not None:
        settings["honour_deletes"] = args.deletes == "honour"
    if getattr(args, "sketch_processes", None) is not None:
        settings["sketch_processes"] = args.sketch_processes
    elif small_input(getattr(args, "inputs", None) or []):
        settings["sketch_processes"] = 0  # as _launch, which then started no worker early
    if getattr(args, "max_miss_rate", None) is not None:
        settings["max_miss_rate"] = args.max_miss_rate
    if stored:
        # An existing index keeps the shape it was built with, unless the
        # command line asks for another one (which then fails, naming it).
        settings.setdefault("shingle_size", stored.get("shingle_size"))
        settings.setdefault("seed", stored.get("seed"))
        if "num_perm" not in settings or settings["num_perm"] == stored.get("num_perm"):
            settings["num_perm"] = stored.get("num_perm")
            if "jaccard_threshold" in settings and "bands" not in settings:
                _refuse_split_change(settings, stored)
            settings.setdefault("bands", stored.get("bands"))
            settings.setdefault("rows", stored.get("rows"))
    return FilterConfig(**settings)


def _refuse_split_change(settings: dict[str, Any], stored: dict[str, Any]) -> None:
    """A --threshold whose LSH split differs from the one the index was built
    with is refused: the index's band keys were cut by the old split, and
    judging with the old split at the new threshold misses what a fresh index
    finds (30 of 500 pairs at 0.3 on an index built at 0.9)."""
    wanted = FilterConfig(**settings)
    if (wanted.bands, wanted.rows) == (stored.get("bands"), stored.get("rows")):
        return
    raise ConfigError(
        f"--threshold {wanted.jaccard_threshold} needs the LSH split of {wanted.bands} bands x {wanted.rows} rows, "
        f"but this index was built with {stored.get('bands')} x {stored.get('rows')}, and a split cannot change in "
        "place: leave --threshold out (or give the one the index was built with), or replay into a new index"
    )
