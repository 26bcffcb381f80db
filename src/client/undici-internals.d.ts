// The client loads only undici's HTTP/1.1 Client and its request() API, not the package index
// (which pulls in fetch, WebSocket, caches, mocks, proxies…): start-up time is a product feature.
declare module 'undici/lib/dispatcher/client.js' {
  import type { Client } from 'undici';
  const ClientClass: typeof Client;
  export = ClientClass;
}

declare module 'undici/lib/api/api-request.js' {
  import type { Dispatcher } from 'undici';
  function request(this: Dispatcher, options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  export = request;
}
