// loopback.mjs keeps a third-party server off the network: preloaded with
// `node --import <this file> ...`, it makes every TCP listen that names a
// port but no host bind 127.0.0.1 instead of all interfaces, and reports each
// bound address on stderr as
//
//   loopback.mjs: listening on 127.0.0.1:PORT
//
// which the Go e2e tests wait for to know the server is up. server-everything's
// streamable HTTP mode calls app.listen(PORT) with no host (it would bind
// every interface) and has no option to restrict it.
import net from 'node:net';

const LOOPBACK = '127.0.0.1';
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const [first] = args;
  const isPort = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
  if (isPort && typeof args[1] !== 'string') {
    // listen(port[, backlog][, callback]) -> listen(port, host[, backlog][, callback])
    args.splice(1, 0, LOOPBACK);
  } else if (first && typeof first === 'object' && !(first instanceof net.Server) &&
    first.path === undefined && first.handle === undefined && first.fd === undefined &&
    first.host === undefined) {
    args[0] = { ...first, host: LOOPBACK };
  }
  this.once('listening', () => {
    const addr = this.address();
    if (addr && typeof addr === 'object') {
      process.stderr.write(`loopback.mjs: listening on ${addr.address}:${addr.port}\n`);
    }
  });
  return listen.apply(this, args);
};
