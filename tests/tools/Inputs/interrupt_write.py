"""Interrupts a tool while it writes a large output; no temporary may stay.

    interrupt_write.py SIGNAL OUTPUT COMMAND...

Starts COMMAND (which writes OUTPUT, and maybe OUTPUT.data, through
temporaries OUTPUT*.tmp-XXXXXX), polls until a temporary appears, sends
SIGNAL (INT or TERM), waits for the tool to end, and fails if it was not
stopped by the signal or if any file named OUTPUT* is left. Polls with generous limits so that
a loaded machine passes: up to 600 s for the temporary to appear.
"""

import glob
import signal
import subprocess
import sys
import time


def main():
    signame, output, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    signum = {"INT": signal.SIGINT, "TERM": signal.SIGTERM}[signame]
    pattern = glob.escape(output) + "*.tmp-*"
    # lit's workers ignore SIGINT, and an ignored signal stays ignored
    # across exec: give the tool the default, as a shell would.
    tool = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 600
    while not glob.glob(pattern):
        if tool.poll() is not None:
            sys.exit("the tool ended (exit %d) before its temporary appeared: "
                     "%s" % (tool.returncode, tool.stderr.read().decode()))
        if time.monotonic() > deadline:
            tool.kill()
            sys.exit("no temporary appeared in 600 s")
        time.sleep(0.005)
    tool.send_signal(signum)
    try:
        tool.wait(timeout=300)
    except subprocess.TimeoutExpired:
        tool.kill()
        sys.exit("the tool did not end within 300 s of SIG" + signame)
    if tool.returncode != -signum:
        sys.exit("the tool ended with exit %d, not by SIG%s (it finished "
                 "before the signal?)" % (tool.returncode, signame))
    left = glob.glob(glob.escape(output) + "*")
    if left:
        sys.exit("left behind: " + ", ".join(sorted(left)))
    print("SIG%s while writing: stopped, no temporary left" % signame)


if __name__ == "__main__":
    main()
