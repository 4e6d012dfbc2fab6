"""A run of `omnivoice` that writes its own peak RSS (VmHWM, in MiB) to a file at exit: argv is
(the file, the command's arguments...). test_book.py, test_book_hostile.py."""

PEAK_RSS = """
import atexit, sys

def peak(path):  # this process's own peak RSS (VmHWM: not what the parent held, as ru_maxrss would)
    with open("/proc/self/status") as f:
        mib = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) // 1024
    with open(path, "w") as f:
        f.write(str(mib))

atexit.register(peak, sys.argv[1])
sys.argv = ["omnivoice", *sys.argv[2:]]
from omnivoice_cli.cli import main
main()
"""
