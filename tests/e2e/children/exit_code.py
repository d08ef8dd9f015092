"""Exits with the code given, or kills itself with the signal given."""
import os, signal, sys
args = sys.argv
if "--signal" in args:
    os.kill(os.getpid(), int(args[args.index("--signal") + 1]))
sys.exit(int(args[args.index("--code") + 1]) if "--code" in args else 0)
