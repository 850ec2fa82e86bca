import sys

from ._cli import main

# Guarded: worker processes import the parent's __main__ module.
if __name__ == "__main__":
    sys.exit(main())
