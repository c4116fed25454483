import sys

from gpuviewer.app.cli import main

# The guard matters: the loader's spawned process imports this module again as __mp_main__.
if __name__ == "__main__":
    sys.exit(main())
