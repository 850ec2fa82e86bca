from ._launch import run

# Guarded: worker processes import the parent's __main__ module.
if __name__ == "__main__":
    run()
