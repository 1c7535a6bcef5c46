"""``python -m course <command>``: see course/cli.py for the list."""

import sys

from course.cli import main

sys.exit(main())
