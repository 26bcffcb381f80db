/**
 * The bench's baseline: a bare Fastify server with kvb's logger settings whose routes do no
 * storage work. GET answers a fixed 100-byte body; POST, PUT and PATCH echo their body.
 * Usage: node baseline-server.js <port>   (prints one log line when it listens)
 */
import Fastify, { LogController } from 'fastify';

const port = Number(process.argv[2] ?? 0);
const body = Buffer.alloc(100, 'v');

const app = Fastify({
  logger: { level: 'info', redact: ['req.headers.authorization', 'req.headers.cookie'] },
  logController: new LogController({ disableRequestLogging: true }),
  bodyLimit: 16 * 1024,
});
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, raw, done) => done(null, raw));

app.get('/health', async () => ({ status: 'ok' }));
app.get('/*', async (_request, reply) => reply.header('content-type', 'text/plain; charset=utf-8').send(body));
const echo = async (request: { body: unknown }) => request.body;
app.post('/*', echo);
app.put('/*', echo);
app.patch('/*', echo);

await app.ready();
app.server.listen({ port, host: '127.0.0.1' }, () => {
  const address = app.server.address();
  app.log.info(`baseline listening on port ${typeof address === 'object' && address ? address.port : port}`);
});
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
