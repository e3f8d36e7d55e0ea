// memjs (binary protocol, one connection per server) against sakerd: run by
// tests/check_clients.  Usage: node memjs_test.js PORT
// memjs comes from the npm registry (tests/clients/package.json; NODE_PATH
// or tests/clients/node_modules).
'use strict';
const memjs = require('memjs');

const port = process.argv[2];
const logger = { log: () => {} };
// timeout (seconds) above the longest t= used below: memjs's default 0.5 s
// would give up on a get still waiting (docs/clients.md)
const mc = memjs.Client.create('127.0.0.1:' + port, { timeout: 20, retries: 0, logger });

function check(what, got, want) {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    process.stderr.write('FAIL ' + what + ': got ' + JSON.stringify(got) +
      ', want ' + JSON.stringify(want) + '\n');
    process.exit(1);
  }
  console.log('ok ' + what);
}

const str = (r) => (r.value === null ? null : r.value.toString());

async function refused(p) {
  try {
    await p;
    return 'accepted';
  } catch (e) {
    return /Not supported|not supported/.test(e.message) ? 'refused' : e.message;
  }
}

async function main() {
  check('set', await mc.set('jq', 'hello', {}), true);
  check('get', str(await mc.get('jq')), 'hello');
  check('get empty', str(await mc.get('jq')), null);
  check('add', await mc.add('jq', 'added', {}), true);
  check('replace refused', await refused(mc.replace('jq', 'x', {})), 'refused');
  check('append refused', await refused(mc.append('jq', 'x')), 'refused');
  check('prepend refused', await refused(mc.prepend('jq', 'x')), 'refused');
  check('in step', str(await mc.get('jq')), 'added');

  // one connection: a set issued while our own blocking get waits wakes it
  let t0 = Date.now();
  const waiting = mc.get('jw/t=8000');
  const stored = mc.set('jw', 'mine', {});
  check('own set wakes own get', str(await waiting), 'mine');
  check('set behind the get', await stored, true);
  check('woken at once', Date.now() - t0 < 6000, true);

  // many gets in flight on the one connection: the replies in order
  for (let i = 0; i < 200; i++) mc.set('jm', 'v' + i, {});
  const gets = [];
  for (let i = 0; i < 200; i++) gets.push(mc.get('jm'));
  const vals = (await Promise.all(gets)).map(str);
  check('200 pipelined gets in order', vals[0] === 'v0' && vals[199] === 'v199', true);

  t0 = Date.now();
  check('blocking get timeout', str(await mc.get('jt/t=300')), null);
  const el = Date.now() - t0;
  check('waited', el >= 250 && el < 5000, true);

  await mc.set('jr', 'item', {});
  check('open', str(await mc.get('jr/open')), 'item');
  check('close', str(await mc.get('jr/close')), null);
  check('gone', str(await mc.get('jr')), null);
  check('delete', await mc.delete('jq'), true);

  const st = await new Promise((resolve, reject) => {
    mc.stats((err, server, stats) => (err ? reject(err) : resolve(stats)));
  });
  check('stats', Number(st.curr_connections) >= 1, true);
  check('stats queues_omitted', 'queues_omitted' in st, true);
  mc.quit();
  console.log('done');
}

main().catch((e) => {
  process.stderr.write('FAIL ' + (e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
