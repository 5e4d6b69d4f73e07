import sys

from tinynpu.cli import main

sys.exit(main())
