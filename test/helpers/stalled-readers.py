"""Opens N connections that send one GET and then stop reading (tiny receive buffers, so the
server's side fills up as a real slow client's would). After PAUSE seconds, reads what is left
until the server closes or READ seconds pass, and prints the bytes each one got as JSON.
Usage: stalled-readers.py HOST PORT PATH N PAUSE READ"""
import json, socket, sys, time

host, port, path, n, pause, read = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((host, port))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    socks.append(s)
# Stall only once the server is answering each one (a byte is waiting, peeked, not read): on a busy
# machine a listing can start seconds after its request, and the pause must start after it does.
for s in socks:
    s.settimeout(60)
    s.recv(1, socket.MSG_PEEK)
    s.settimeout(None)
print("stalled", flush=True)
# The stall is the scenario itself (readers that stop reading), not a wait for a result.
time.sleep(pause)
# Every socket is read at once, so draining one does not give another more time to be cut.
import selectors
sel = selectors.DefaultSelector()
state = [{"bytes": 0, "closed": False} for _ in socks]
for i, s in enumerate(socks):
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, i)
deadline = time.time() + read
while time.time() < deadline and not all(st["closed"] for st in state):
    for key, _ in sel.select(timeout=0.2):
        i = key.data
        try:
            chunk = socks[i].recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            state[i]["closed"] = True
            sel.unregister(socks[i])
        else:
            state[i]["bytes"] += len(chunk)
for s in socks:
    s.close()
print(json.dumps(state), flush=True)
