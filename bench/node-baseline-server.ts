/**
 * The bench's floor: a bare `node:http` handler, no framework, no logging, no storage. GET answers
 * a fixed 100-byte body (`/health` a small JSON one); POST, PUT and PATCH echo their body. What
 * any HTTP server on Node pays per request; the kvb rows are held to a multiple of it.
 * Usage: node node-baseline-server.js <port>   (prints one line when it listens)
 */
import { createServer } from 'node:http';

const port = Number(process.argv[2] ?? 0);
const body = Buffer.alloc(100, 'v');
const health = '{"status":"ok"}';

const server = createServer((req, res) => {
  if (req.method === 'GET' || req.method === 'HEAD') {
    const json = req.url === '/health';
    res.writeHead(200, {
      'content-type': json ? 'application/json; charset=utf-8' : 'text/plain; charset=utf-8',
      'content-length': json ? health.length : body.length,
    });
    res.end(json ? health : body);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const echo = Buffer.concat(chunks);
    res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/octet-stream', 'content-length': echo.length });
    res.end(echo);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  console.log(`node:http baseline listening on port ${typeof address === 'object' && address ? address.port : port}`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
