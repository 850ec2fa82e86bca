"""The command line: ``streamfilter replay``, ``follow`` and ``params``.

- ``_parser``: the arguments and the FilterConfig they describe;
- ``_inputs``: files, stdin and live sources, progress and signals;
- ``_outputs``: novel records, verdict lines and the summary;
- ``_main``: the commands.

The library never imports this package.
"""

from ._main import main

__all__ = ["main"]
