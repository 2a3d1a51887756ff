// The page's own script, run by the browser after uPlot's IIFE: it reads the chart models from
// the JSON block and draws one uPlot per `.chart` element. Plain ES2017 in a string (no build
// step; no backslashes or template literals inside), so what runs in the browser is this text.
export const CLIENT_SCRIPT = `
(function () {
  'use strict';
  var charts = JSON.parse(document.getElementById('report-data').textContent);
  var dpr = window.devicePixelRatio || 1;
  var made = [];

  function faultPlugin(faults) {
    return {
      hooks: {
        draw: [function (u) {
          if (!faults.length) return;
          var ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
          ctx.save();
          ctx.beginPath();
          ctx.rect(u.bbox.left, top, u.bbox.width, height);
          ctx.clip();
          var lastX = -1e9, row = 0;
          faults.forEach(function (f, i) {
            var x0 = u.valToPos(f.start, 'x', true);
            var x1 = u.valToPos(f.end, 'x', true);
            var colour = f.error ? '107,114,128' : '220,38,38';
            ctx.fillStyle = 'rgba(' + colour + ',0.08)';
            ctx.fillRect(x0, top, Math.max(x1 - x0, 2 * dpr), height);
            ctx.strokeStyle = 'rgba(' + colour + ',0.85)';
            ctx.lineWidth = 1.25 * dpr;
            ctx.setLineDash([5 * dpr, 3 * dpr]);
            ctx.beginPath();
            ctx.moveTo(x0, top);
            ctx.lineTo(x0, top + height);
            ctx.stroke();
            ctx.setLineDash([]);
            // A numbered badge per fault, keyed to the list above the plots; stacked when close.
            var r = 7.5 * dpr;
            row = x0 - lastX < 2.2 * r ? row + 1 : 0;
            lastX = x0;
            var cy = top + r + 2 * dpr + row * (2 * r + 2 * dpr);
            ctx.beginPath();
            ctx.arc(x0, cy, r, 0, 2 * Math.PI);
            ctx.fillStyle = 'rgb(' + (f.error ? '107,114,128' : '220,38,38') + ')';
            ctx.fill();
            ctx.fillStyle = '#fff';
            ctx.font = '700 ' + (10 * dpr) + 'px system-ui, -apple-system, Segoe UI, sans-serif';
            ctx.textAlign = 'center';
            ctx.textBaseline = 'middle';
            ctx.fillText(String(i + 1), x0, cy + 0.5 * dpr);
          });
          ctx.restore();
        }]
      }
    };
  }

  function fmt(v, unit) {
    if (v == null) return '-';
    var n = Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 10) / 10;
    return n.toLocaleString('en') + ' ' + unit;
  }

  function build(el, model) {
    var width = Math.max(260, el.clientWidth);
    var opts = {
      width: width,
      height: 230,
      plugins: [faultPlugin(model.faults)],
      cursor: { sync: { key: model.group }, drag: { x: false, y: false } },
      legend: { live: true },
      scales: {
        x: { time: false, range: [0, model.xMax] },
        y: { range: function (u, min, max) { return [Math.min(0, min || 0), Math.max(1, (max || 0) * 1.12)]; } }
      },
      axes: [
        { stroke: '#64748b', grid: { stroke: '#eef2f7' }, ticks: { stroke: '#e2e8f0' },
          values: function (u, vals) { return vals.map(function (v) { return v + ' s'; }); } },
        { stroke: '#64748b', grid: { stroke: '#eef2f7' }, ticks: { stroke: '#e2e8f0' }, size: 56 }
      ],
      series: [{ label: 't', value: function (u, v) { return v == null ? '-' : v.toFixed(1) + ' s'; } }].concat(
        model.series.map(function (s) {
          var out = {
            label: s.label,
            stroke: s.color,
            width: s.width || 1.5,
            spanGaps: false,
            points: { show: false },
            value: function (u, v) { return fmt(v, model.unit); }
          };
          if (s.dash) out.dash = s.dash;
          if (s.fill) out.fill = s.fill;
          if (s.stepped) out.paths = uPlot.paths.stepped({ align: 1 });
          return out;
        })
      )
    };
    var u = new uPlot(opts, model.data, el);
    made.push({ id: model.id, el: el, plot: u, series: model.series.length });
    return u;
  }

  var byId = {};
  charts.forEach(function (c) { byId[c.id] = c; });
  document.querySelectorAll('.chart[data-chart]').forEach(function (el) {
    var model = byId[el.getAttribute('data-chart')];
    if (model) build(el, model);
  });

  var pending = 0;
  window.addEventListener('resize', function () {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(function () {
      made.forEach(function (m) { m.plot.setSize({ width: Math.max(260, m.el.clientWidth), height: 230 }); });
    });
  });

  window.__report = { charts: made.map(function (m) { return { id: m.id, series: m.series }; }) };
  window.__reportReady = true;
})();
`
