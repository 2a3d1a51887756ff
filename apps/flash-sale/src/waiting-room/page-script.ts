// The waiting-room page's script: join, poll, buy. Plain ES2017 in a string (no build step; no
// backslashes, template literals or external URLs inside), allowed by the page's CSP through
// its SHA-256, so what runs in the browser is exactly this text. It talks only to its own origin.
export const PAGE_SCRIPT = `
(function () {
  'use strict';
  var productId = document.querySelector('meta[name="product-id"]').getAttribute('content');
  var storeKey = 'waiting-room:' + productId;
  var el = function (id) { return document.getElementById(id); };
  var joinStep = el('join-step'), queueStep = el('queue-step'), form = el('join-form');
  var userInput = el('user-id'), joinButton = el('join-button'), joinError = el('join-error');
  var headline = el('headline'), detail = el('detail'), progress = el('progress');
  var progressText = el('progress-text'), figPosition = el('fig-position'), figWait = el('fig-wait');
  var figLine = el('fig-line'), buyButton = el('buy-button'), rejoinButton = el('rejoin-button');
  var result = el('result'), steps = el('steps'), countdown = el('countdown');
  var state = load() || {};
  var pollTimer = 0, tickTimer = 0, lastStatus = '', busy = false;

  function load() {
    try { return JSON.parse(window.localStorage.getItem(storeKey) || 'null'); } catch (e) { return null; }
  }
  function save() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(state)); } catch (e) { /* private mode */ }
  }
  function clock(d) { return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }); }
  function duration(s) {
    if (s < 60) return s <= 5 ? 'a few seconds' : 'about ' + Math.round(s / 5) * 5 + ' seconds';
    if (s < 3600) return 'about ' + Math.round(s / 60) + ' min';
    return 'about ' + Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
  }
  function short(s) {
    if (s < 60) return s <= 5 ? 'seconds' : Math.round(s / 5) * 5 + ' s';
    if (s < 3600) return Math.round(s / 60) + ' min';
    return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
  }
  function mmss(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0');
  }
  function step(text) {
    var li = document.createElement('li');
    var time = document.createElement('time');
    time.textContent = clock(new Date());
    li.appendChild(time);
    li.appendChild(document.createTextNode(' ' + text));
    steps.appendChild(li);
  }
  function setPhase(phase) {
    document.body.setAttribute('data-state', phase);
  }
  function newKey() {
    var a = new Uint8Array(16);
    window.crypto.getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return (b + 256).toString(16).slice(1); }).join('');
  }
  function call(method, path, body, headers) {
    var h = { accept: 'application/json' };
    if (body !== undefined) h['content-type'] = 'application/json';
    Object.keys(headers || {}).forEach(function (k) { h[k] = headers[k]; });
    return fetch(path, {
      method: method, headers: h, credentials: 'same-origin', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (json) {
        return { status: res.status, body: json, retryAfter: Number(res.headers.get('retry-after') || 0) };
      });
    });
  }
  function schedule(seconds) {
    clearTimeout(pollTimer);
    pollTimer = setTimeout(poll, Math.max(1, seconds) * 1000);
  }
  function announce(head, more) {
    // The live region speaks when the situation changes, not at every poll.
    if (headline.textContent !== head) headline.textContent = head;
    detail.textContent = more || '';
  }

  function show(a) {
    state.ticket = a.ticket || state.ticket;
    state.user = a.user_id;
    joinStep.hidden = true;
    queueStep.hidden = false;
    rejoinButton.hidden = true;
    var changed = a.status + '|' + (a.reason || '') + '|' + a.draw;
    figLine.textContent = String(a.waiting);
    if (a.status === 'waiting' || (a.status === 'sold_out' && a.position)) {
      if (a.draw === 'done' && (!state.first || state.firstDraw !== 'done')) {
        state.first = a.position;
        state.firstDraw = 'done';
      }
      if (!state.first || a.position > state.first) state.first = a.position;
      var ahead = state.first - 1;
      var gone = Math.max(0, state.first - a.position);
      progress.max = Math.max(ahead, 1);
      progress.value = ahead === 0 ? 1 : gone;
      progressText.textContent = ahead === 0 ? 'You are at the front.'
        : gone + ' of the ' + ahead + ' people ahead of you have gone in.';
      figPosition.textContent = String(a.position);
    } else {
      figPosition.textContent = '–';
    }
    if (a.status === 'waiting') {
      figWait.textContent = a.eta_seconds === null ? 'unknown' : short(a.eta_seconds);
      buyButton.hidden = true;
      if (a.draw === 'pending') {
        var opens = new Date(a.starts_at);
        setPhase('before-start');
        announce('You are in line. The sale opens at ' + clock(opens) + '.',
          'Everyone who joins before the opening is placed by a lottery at ' + clock(opens) +
          ': joining early or from several tabs gives no edge. Your place in the draw so far: ' +
          a.position + ' of ' + a.waiting + '.');
      } else {
        setPhase('waiting');
        announce('You are in line: number ' + a.position + '.',
          a.eta_seconds === null
            ? 'The line is not moving right now: admitted shoppers are still buying. It moves again as soon as they finish or their time runs out.'
            : 'Estimated wait: ' + duration(a.eta_seconds) + (a.admit_rate > 0
              ? ', from the rate people are let in now (' + a.admit_rate + ' a second)' : '') +
              '. Keep this page open.');
      }
      if (lastStatus !== changed) step(a.draw === 'pending'
        ? 'Joined before the opening: place ' + a.position + ' in the draw so far.'
        : 'In line at number ' + a.position + '.');
      schedule(a.poll_after_seconds || 3);
    } else if (a.status === 'admitted') {
      setPhase('admitted');
      progress.max = 1;
      progress.value = 1;
      progressText.textContent = 'It is your turn.';
      figWait.textContent = 'now';
      state.until = a.admitted_until;
      announce('It is your turn! You can buy now.',
        'Your turn lasts until ' + clock(new Date(a.admitted_until)) + '. Press Buy to place your order.');
      buyButton.hidden = false;
      buyButton.disabled = busy;
      if (lastStatus !== changed) {
        step('Your turn: you may buy until ' + clock(new Date(a.admitted_until)) + '.');
        buyButton.focus();
      }
      tick();
      schedule(a.poll_after_seconds || 10);
    } else if (a.status === 'sold_out') {
      setPhase('sold-out');
      buyButton.hidden = true;
      figWait.textContent = '–';
      if (lastStatus !== changed) product();
      announce('Sold out.', 'Every unit is taken. If units come back (a cancelled order), the line moves again and you keep your place: this page keeps checking.');
      if (lastStatus !== changed) step('Sold out.');
      schedule(a.poll_after_seconds || 5);
    } else {
      closed(a);
    }
    lastStatus = changed;
    save();
  }

  function closed(a) {
    clearTimeout(pollTimer);
    buyButton.hidden = true;
    figWait.textContent = '–';
    var texts = {
      sale_ended: ['The sale has ended.', 'No more orders are taken for this product.'],
      purchased: ['You have bought this product.', a.order_id ? 'Your order: ' + a.order_id + '.' : ''],
      dropped: ['You lost your place in line.', 'This page did not check in for too long (a closed tab or a sleeping phone). You can join again, at the back of the line.'],
      admission_expired: ['Your turn ran out.', 'You did not buy in time. You can join again, at the back of the line.']
    };
    var t = texts[a.reason] || ['The line is closed.', ''];
    setPhase(a.reason === 'purchased' ? 'bought' : 'closed');
    done();
    announce(t[0], t[1]);
    if (a.reason === 'dropped' || a.reason === 'admission_expired') rejoinButton.hidden = false;
    step(t[0]);
  }

  function done() {
    clearInterval(tickTimer);
    countdown.textContent = '';
    progressText.textContent = '';
    figWait.textContent = '–';
    product();
  }

  function tick() {
    clearInterval(tickTimer);
    var update = function () {
      if (!state.until || document.body.getAttribute('data-state') !== 'admitted') {
        countdown.textContent = '';
        return clearInterval(tickTimer);
      }
      countdown.textContent = 'Time left to buy: ' + mmss(new Date(state.until).getTime() - Date.now());
    };
    update();
    tickTimer = setInterval(update, 1000);
  }

  function failed(r, what) {
    if (r.status === 0 || r.status >= 500 || r.status === 429) {
      var wait = r.retryAfter || 3;
      detail.textContent = 'The shop is busy or unreachable (' + what + '); trying again in ' + wait +
        ' s. You keep your place meanwhile.';
      return wait;
    }
    return 0;
  }

  function poll() {
    if (!state.ticket) return;
    call('GET', '/v1/queue/' + encodeURIComponent(state.ticket)).then(function (r) {
      if (r.status === 200) return show(r.body);
      var code = r.body && r.body.error && r.body.error.code;
      if (code === 'NO_WAITING_ROOM') return noRoom();
      if (code === 'INVALID_TICKET') {
        delete state.ticket;
        save();
        return restart('Your ticket is no longer valid (' + r.body.error.message + ').');
      }
      schedule(failed(r, 'checking your place') || 5);
    }, function () { schedule(failed({ status: 0 }, 'checking your place')); });
  }

  function join(user) {
    joinButton.disabled = true;
    joinError.textContent = '';
    call('POST', '/v1/sales/' + encodeURIComponent(productId) + '/queue', { user_id: user }).then(function (r) {
      joinButton.disabled = false;
      if (r.status === 200) {
        state = { user: user, ticket: r.body.ticket };
        steps.textContent = '';
        step('Joined the line as customer ' + user + '.');
        return show(r.body);
      }
      var err = (r.body && r.body.error) || {};
      if (err.code === 'NO_WAITING_ROOM') { state = { user: user }; return noRoom(); }
      var wait = failed(r, 'joining');
      joinError.textContent = wait ? 'The shop is busy; please try again in ' + wait + ' s.'
        : (err.message || 'Could not join the line.');
    }, function () {
      joinButton.disabled = false;
      joinError.textContent = 'The shop cannot be reached. Check your connection and try again.';
    });
  }

  function noRoom() {
    joinStep.hidden = true;
    queueStep.hidden = false;
    setPhase('admitted');
    announce('There is no line for this sale right now.', 'You can buy directly.');
    buyButton.hidden = false;
  }

  function restart(why) {
    clearTimeout(pollTimer);
    setPhase('join');
    queueStep.hidden = true;
    joinStep.hidden = false;
    joinError.textContent = why || '';
    userInput.value = state.user || userInput.value;
    userInput.focus();
  }

  function buy() {
    if (busy) return;
    busy = true;
    buyButton.disabled = true;
    state.idem = state.idem || newKey();
    save();
    result.textContent = 'Placing your order…';
    var headers = { 'idempotency-key': state.idem };
    if (state.ticket) headers['waiting-room-ticket'] = state.ticket;
    call('POST', '/v1/checkout', { product_id: productId, user_id: state.user }, headers).then(function (r) {
      busy = false;
      buyButton.disabled = false;
      var err = (r.body && r.body.error) || {};
      if (r.status === 200 || r.status === 202) {
        clearTimeout(pollTimer);
        delete state.idem;
        state.order = r.body.order_id;
        save();
        setPhase('bought');
        buyButton.hidden = true;
        done();
        announce('You bought it!', 'Order ' + r.body.order_id + (r.status === 202
          ? ' is reserved and being confirmed.' : ' is reserved for you.'));
        result.textContent = 'Order number: ' + r.body.order_id;
        step('Bought: order ' + r.body.order_id + '.');
        return;
      }
      if (err.code === 'ALREADY_PURCHASED') {
        clearTimeout(pollTimer);
        delete state.idem;
        save();
        setPhase('bought');
        buyButton.hidden = true;
        announce('You already bought this product.', err.order_id ? 'Your order: ' + err.order_id + '.' : '');
        result.textContent = '';
        step('Already bought' + (err.order_id ? ': order ' + err.order_id : '') + '.');
        return;
      }
      if (err.code === 'SOLD_OUT' || err.code === 'SALE_ENDED') {
        delete state.idem;
        save();
        setPhase(err.code === 'SOLD_OUT' ? 'sold-out' : 'closed');
        buyButton.hidden = true;
        announce(err.code === 'SOLD_OUT' ? 'Sold out.' : 'The sale has ended.',
          err.code === 'SOLD_OUT' ? 'The last unit went just before your order. Nothing was charged.' : '');
        result.textContent = '';
        step(err.code === 'SOLD_OUT' ? 'Sold out before the order.' : 'The sale ended.');
        if (err.code === 'SOLD_OUT') schedule(5);
        return;
      }
      if (err.code === 'NOT_ADMITTED' || err.code === 'WAITING_ROOM') {
        result.textContent = 'It is not your turn yet.';
        return state.ticket ? poll() : restart('Join the line first.');
      }
      if (err.code === 'INVALID_TICKET') {
        delete state.idem;
        delete state.ticket;
        save();
        result.textContent = '';
        return restart(err.message || 'Your turn is over.');
      }
      var wait = failed(r, 'placing your order');
      if (wait) {
        // The same Idempotency-Key: a retry can never order twice.
        result.textContent = 'The shop is busy; retrying your order in ' + wait + ' s (it cannot be placed twice).';
        return setTimeout(buy, wait * 1000);
      }
      result.textContent = err.message || 'The order failed.';
    }, function () {
      busy = false;
      result.textContent = 'The shop cannot be reached; retrying your order in 3 s (it cannot be placed twice).';
      setTimeout(buy, 3000);
    });
  }

  form.addEventListener('submit', function (e) {
    e.preventDefault();
    var user = userInput.value.trim();
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(user)) {
      joinError.textContent = 'A customer number is 1 to 64 letters, digits, - or _.';
      userInput.focus();
      return;
    }
    join(user);
  });
  buyButton.addEventListener('click', buy);
  rejoinButton.addEventListener('click', function () { join(state.user); });

  function product() {
    call('GET', '/v1/products/' + encodeURIComponent(productId)).then(function (r) {
      if (r.status !== 200) return;
      el('product-name').textContent = r.body.name;
      el('product-info').textContent = 'Price ' +
        new Intl.NumberFormat(undefined, { minimumFractionDigits: 2 }).format(r.body.price) + ' · ' +
        (r.body.remaining_stock > 0 ? r.body.remaining_stock + ' left' : 'none left');
    }, function () {});
  }
  product();

  var fromUrl = new URLSearchParams(window.location.search).get('user');
  if (fromUrl && fromUrl !== state.user) state = { user: fromUrl };
  if (state.user) userInput.value = state.user;
  if (state.ticket) {
    joinStep.hidden = true;
    queueStep.hidden = false;
    step('Welcome back: checking your place.');
    poll();
  } else {
    setPhase('join');
  }
})();
`
