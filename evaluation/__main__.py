import os
import sys

from evaluation.cli import FAST_EXIT, main

code = main()
if FAST_EXIT.get("allowed"):
    # A grading run has written and closed everything by now; the interpreter's own teardown
    # (finalising numba's and LLVM's objects, every module) would add 0.2-0.8 s to each run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
