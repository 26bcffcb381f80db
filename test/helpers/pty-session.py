"""Drives a command in a pseudo-terminal with scripted keystrokes, for testing interactive prompts.

Usage: python3 pty-session.py STEPS_JSON -- COMMAND ARGS...
STEPS_JSON is a list of {"expect": text, "send": keys}: wait until `text` has appeared in the
output (ANSI escapes removed), then type `keys`. Prints one JSON object on stdout:
{"exitCode": n, "output": all output with escapes removed, "raw": all output as written,
"timedOut": text or null}. Writes "sent N" on stderr once step N's keys are typed.
"""
import fcntl, json, os, pty, re, select, signal, struct, sys, termios, time

ANSI = re.compile(r'\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]')

def main():
    steps = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index('--') + 1:]
    # PTY_COLUMNS sets the terminal's width (120 by default).
    columns = int(os.environ.get('PTY_COLUMNS', '120'))
    pid, fd = pty.fork()
    if pid == 0:
        os.environ['COLUMNS'] = str(columns)
        # Sized before the command starts, so it never sees the default 0x0 window.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 40, columns, 0, 0))
        os.execvp(command[0], command)
    # A real size: with the default 0x0 window, prompts wrap after every character.
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 40, columns, 0, 0))
    raw = b''
    timed_out = None

    def read(timeout):
        nonlocal raw
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        raw += chunk
        return True

    for index, step in enumerate(steps):
        deadline = time.time() + 15
        start = len(ANSI.sub('', raw.decode('utf8', 'replace')))
        while step['expect'] not in ANSI.sub('', raw.decode('utf8', 'replace'))[max(0, start - 200):]:
            if time.time() > deadline or not read(0.2):
                timed_out = step['expect']
                break
        if timed_out:
            break
        # Let the prompt finish rendering and enter raw mode: the prompt text is the event waited
        # for above; nothing is asserted on this pause, it only orders the keys after the redraw.
        time.sleep(0.15)
        os.write(fd, step['send'].encode('utf8'))
        # Tells the caller the keys are in the terminal, for a test that must act only after them.
        sys.stderr.write('sent %d\n' % index)
        sys.stderr.flush()
    # Read until the child closes the terminal (or 20 s pass), then collect its exit status.
    deadline = time.time() + 20
    while time.time() < deadline and read(0.2):
        pass
    status = None
    while status is None and time.time() < deadline + 5:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        else:
            time.sleep(0.05)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    text = raw.decode('utf8', 'replace')
    print(json.dumps({'exitCode': code, 'output': ANSI.sub('', text), 'raw': text, 'timedOut': timed_out}))

main()
