import { createHash } from 'node:crypto'
import { PAGE_SCRIPT } from './page-script.js'

/**
 * GET /queue/:product_id: the waiting room as a page people use, self-contained (inline CSS and
 * script, no CDN, no font, no image), talking only to its own origin. The CSP allows exactly
 * this page's script and style by their SHA-256, and fetches to 'self'; nothing else loads.
 * The product id is the only variable part, in a <meta> the script reads, so the hashes are
 * fixed at start-up.
 */
const PAGE_STYLE = `
:root { color-scheme: light; --ink: #16181d; --muted: #4b5260; --line: #d5d9e0; --accent: #0b5cd5;
  --accent-ink: #ffffff; --ok: #0f7a3d; --warn: #9a4b00; --bad: #b3261e; --bg: #f5f6f8; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 1rem/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  background: var(--bg); }
main { max-width: 32rem; margin: 0 auto; padding: 1.25rem 1rem 2rem; }
header { margin-bottom: 1rem; }
.eyebrow { margin: 0; font-size: .8rem; letter-spacing: .08em; text-transform: uppercase; color: var(--muted); }
h1 { margin: .15rem 0 .1rem; font-size: 1.6rem; line-height: 1.2; }
h2 { font-size: 1.15rem; margin: 0 0 .5rem; }
.muted, .hint { color: var(--muted); }
.hint { font-size: .9rem; margin: .3rem 0 0; }
.card { background: #fff; border: 1px solid var(--line); border-radius: .75rem; padding: 1rem; margin-bottom: 1rem; }
label { display: block; font-weight: 600; margin-bottom: .35rem; }
input { width: 100%; font: inherit; padding: .7rem .8rem; border: 1px solid #8a93a3; border-radius: .5rem; }
input:focus-visible, button:focus-visible { outline: 3px solid #f2a900; outline-offset: 2px; }
button { display: block; width: 100%; min-height: 3rem; margin-top: .9rem; font: inherit; font-weight: 700;
  border: 0; border-radius: .6rem; background: var(--accent); color: var(--accent-ink); cursor: pointer; }
button:disabled { opacity: .6; cursor: progress; }
button.secondary { background: #fff; color: var(--accent); border: 2px solid var(--accent); }
.error { color: var(--bad); font-weight: 600; min-height: 1.5em; margin: .5rem 0 0; }
#headline { font-size: 1.25rem; font-weight: 700; margin: 0 0 .35rem; }
#detail { margin: 0; color: var(--muted); }
[data-state="admitted"] #headline, [data-state="bought"] #headline { color: var(--ok); }
[data-state="sold-out"] #headline, [data-state="closed"] #headline { color: var(--bad); }
dl { display: grid; grid-template-columns: repeat(3, 1fr); gap: .5rem; margin: 1rem 0 .75rem; }
dl div { background: var(--bg); border-radius: .5rem; padding: .5rem; text-align: center; }
dt { font-size: .8rem; color: var(--muted); }
dd { margin: 0; font-size: 1.2rem; font-weight: 700; overflow-wrap: anywhere; }
progress { width: 100%; height: 1rem; accent-color: var(--accent); }
#progress-text, #countdown { font-size: .9rem; color: var(--muted); margin: .25rem 0 0; }
#countdown { font-weight: 700; color: var(--warn); }
#result { font-weight: 700; overflow-wrap: anywhere; margin: .75rem 0 0; }
ol { margin: 0; padding-left: 1.2rem; }
li { margin: .2rem 0; }
time { color: var(--muted); font-variant-numeric: tabular-nums; }
footer { font-size: .85rem; color: var(--muted); }
`

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`

/** The page's Content-Security-Policy: its own script and style only, requests to itself only. */
export const QUEUE_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(PAGE_SCRIPT)}`,
  `style-src ${sha256(PAGE_STYLE)}`,
  "connect-src 'self'",
  // The empty icon below: browsers otherwise fetch /favicon.ico, which CSP would refuse loudly.
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

/** Headers sent with the page (besides Content-Type). */
export const QUEUE_PAGE_HEADERS = Object.freeze({
  'content-security-policy': QUEUE_PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
  'cross-origin-opener-policy': 'same-origin',
})

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

/** `productId` is already a validated id (A-Z a-z 0-9 _ -); it is escaped all the same. */
export function renderQueuePage(productId: string): string {
  const id = escapeHtml(productId)
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="product-id" content="${id}">
<link rel="icon" href="data:,">
<title>Waiting room · product ${id}</title>
<style>${PAGE_STYLE}</style>
</head>
<body data-state="loading">
<main>
  <header>
    <p class="eyebrow">Flash sale · waiting room</p>
    <h1 id="product-name">Product ${id}</h1>
    <p id="product-info" class="muted"></p>
  </header>

  <section id="join-step" class="card" aria-labelledby="join-title">
    <h2 id="join-title">Get in line</h2>
    <p>Many people want this product at once, so the shop lets them in a few at a time, in order.
      People who join before the sale opens are ordered by a lottery at the opening; after that,
      first come, first served. Nobody is let in if there is nothing left to buy.</p>
    <form id="join-form" novalidate>
      <label for="user-id">Your customer number</label>
      <input id="user-id" name="user_id" autocomplete="off" autocapitalize="off" spellcheck="false"
        required maxlength="64" aria-describedby="user-help join-error">
      <p id="user-help" class="hint">In the shop this comes from your login; here you type it.</p>
      <button type="submit" id="join-button">Join the line</button>
      <p id="join-error" class="error" role="alert"></p>
    </form>
  </section>

  <section id="queue-step" class="card" aria-labelledby="queue-title" hidden>
    <h2 id="queue-title">Your place</h2>
    <div id="status" role="status" aria-live="polite" aria-atomic="true">
      <p id="headline">Checking your place…</p>
      <p id="detail"></p>
    </div>
    <dl>
      <div><dt>Your number</dt><dd id="fig-position">–</dd></div>
      <div><dt>Estimated wait</dt><dd id="fig-wait">–</dd></div>
      <div><dt>In line now</dt><dd id="fig-line">–</dd></div>
    </dl>
    <label for="progress">Progress to the front</label>
    <progress id="progress" max="1" value="0" aria-describedby="progress-text"></progress>
    <p id="progress-text"></p>
    <p id="countdown"></p>
    <button type="button" id="buy-button" hidden>Buy now</button>
    <button type="button" id="rejoin-button" class="secondary" hidden>Join the line again</button>
    <p id="result" role="alert"></p>
  </section>

  <section class="card" aria-labelledby="steps-title">
    <h2 id="steps-title">What happened so far</h2>
    <ol id="steps"></ol>
  </section>

  <footer>
    <p>Keep this page open: it checks your place every few seconds on its own. A place that is not
      checked for about a minute is given up, so that the line keeps moving. Reloading the page or opening
      it in more tabs keeps the same place; it does not give you a better one.</p>
  </footer>
</main>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`
}
