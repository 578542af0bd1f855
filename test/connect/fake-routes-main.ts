// The route stream fake as a program, for tests that need it inside a network namespace:
//   node fake-routes-main.js TOKEN ROUTES_JSON
// prints its URL on the first line, then applies JSON lines from stdin:
//   {"set": {route}} | {"delete": ["namespace", "name"]} | {"drop": true}
import { createInterface } from 'node:readline';
import { FakeRouteServer, type FakeRoute } from './fake-routes.js';

const [token, seed] = process.argv.slice(2);
const server = new FakeRouteServer(token ?? 'token');
for (const r of JSON.parse(seed ?? '[]') as FakeRoute[]) server.set(r);
const url = await server.listen();
process.stdout.write(`${url}\n`);

interface Command {
  set?: FakeRoute;
  delete?: [string, string];
  drop?: boolean;
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const cmd = JSON.parse(line) as Command;
  if (cmd.set) server.set(cmd.set);
  if (cmd.delete) server.delete(cmd.delete[0], cmd.delete[1]);
  if (cmd.drop) server.dropClients();
  process.stdout.write('ok\n');
});
process.stdin.on('end', () => void server.close().then(() => process.exit(0)));
