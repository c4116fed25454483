import sys

from gpuviewer.app.cli import main

sys.exit(main())
