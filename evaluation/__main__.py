import sys

if len(sys.argv) > 1 and sys.argv[1] in ("rescore", "rank"):  # organizer subcommands
    from evaluation.operations import main as operations

    sys.exit(operations(sys.argv[1:]))

from evaluation.cli import main

sys.exit(main())
