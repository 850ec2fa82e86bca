"""The compiled loops (streamfilter/_kernel*.c); everything else is in pyproject.toml.

The extension is optional: where it cannot be built, streamfilter sketches
with mmh3 and numpy (the reference it is tested against), only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamfilter._kernel",
            [
                "streamfilter/_kernel.c",
                "streamfilter/_kernel_rules.c",
                "streamfilter/_kernel_judge.c",
                "streamfilter/_kernel_judge_loop.c",
                "streamfilter/_kernel_normalize.c",
                "streamfilter/_kernel_lmdb.c",
                "streamfilter/_kernel_verdicts.c",
                "streamfilter/_kernel_cache.c",
                "streamfilter/_kernel_json.c",
                "streamfilter/_kernel_time.c",
                "streamfilter/_kernel_clock.c",
                "streamfilter/_kernel_lsh.c",
            ],
            depends=["streamfilter/_kernel.h"],
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
