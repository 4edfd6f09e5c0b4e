"""Entry script of the PyInstaller bundle: the same `pinwheel` command as the wheel's."""

import sys

from app.launcher import main

if __name__ == "__main__":
    sys.exit(main())
