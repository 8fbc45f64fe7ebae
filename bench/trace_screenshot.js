// Screenshot of a trace rendered by Catapult's trace viewer (the engine of chrome://tracing),
// for docs/traces.md. Run outside CI; needs `npm install puppeteer-core` and Debian's chromium.
//
//   node bench/trace_screenshot.js TRACE_VIEW.html OUT.png
//
// TRACE_VIEW.html comes from `python3 catapult/tracing/bin/trace2html trace.json --output ...`.
const puppeteer = require('puppeteer-core');

(async () => {
  const [page_path, png_path] = process.argv.slice(2);
  const browser = await puppeteer.launch({executablePath: '/usr/bin/chromium', headless: true,
                                          args: ['--no-sandbox', '--disable-gpu']});
  const page = await browser.newPage();
  page.on('pageerror', e => { console.error('page error:', e.message); process.exitCode = 1; });
  await page.setViewport({width: 1400, height: 900});
  await page.goto('file://' + require('path').resolve(page_path), {waitUntil: 'load'});
  // The viewer imports the trace asynchronously after load; headless time budgets stop it early.
  await new Promise(resolve => setTimeout(resolve, 20000));
  await page.screenshot({path: png_path});
  await browser.close();
})();
