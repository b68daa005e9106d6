/* The report's explorer (attnlab.report.explorer): vanilla JavaScript and inline SVG over the
   JSON embedded in #explorer-data. Every string from the data goes in as text
   (textContent, setAttribute), never as markup; images are data URIs of base64 checked
   here, so nothing is ever fetched. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var B64 = /^[A-Za-z0-9+/]*={0,2}$/;
  var node = document.getElementById("explorer-data");
  if (!node) return;
  var D = JSON.parse(node.textContent);
  var $ = function (id) { return document.getElementById(id); };
  var ui = {
    train: $("ex-train"), evl: $("ex-eval"), length: $("ex-length"), filter: $("ex-filter"),
    sort: $("ex-sort"), focus: $("ex-focus"), strips: $("ex-strips"), count: $("ex-count"),
    prev: $("ex-prev"), next: $("ex-next"), step: $("ex-step"), title: $("ex-strip-title"),
    views: $("ex-views"), matrix: $("ex-matrix"), note: $("ex-note")
  };
  var state = { train: 0, evl: 0, length: 0, strip: null, step: 0, focus: 0, pick: null };
  var rowsCache = new Map();

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function options(select, items, chosen) {
    clear(select);
    items.forEach(function (item, i) {
      var o = el("option", { value: String(i) }, item);
      if (i === chosen) o.selected = true;
      select.appendChild(o);
    });
  }
  function fmt(p) { return (typeof p === "number" && isFinite(p)) ? p.toFixed(3) : "n/a"; }

  function group() { return D.trains[state.train]; }
  function evaluation() { return group().evals[state.evl]; }
  function lengthEntry() { return evaluation().lengths[state.length]; }
  function ok(read, truth) { return read !== null && read.reading === truth; }

  /* (steps, columns) rows of a reading's weights, each summing to 1; null without any. */
  function rows(read) {
    if (!read || !read.weights || !B64.test(read.weights)) return null;
    if (rowsCache.has(read)) return rowsCache.get(read);
    var raw = atob(read.weights), s = read.weight_steps, t = read.columns, out = null;
    if (raw.length === s * t) {
      out = [];
      for (var i = 0; i < s; i++) {
        var row = new Float64Array(t);
        for (var j = 0; j < t; j++) row[j] = raw.charCodeAt(i * t + j) / 255;
        out.push(row);
      }
    }
    rowsCache.set(read, out);
    return out;
  }
  function peak(row) {
    var best = 0;
    for (var j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
    return best;
  }

  /* [from, to) pixels where a row looks: the peak column and its neighbours with at least
     half the peak's weight, cut to the strip's width. */
  function looked(row, stride, width) {
    var p = peak(row), a = p, b = p;
    while (a > 0 && row[a - 1] >= row[p] / 2) a--;
    while (b < row.length - 1 && row[b + 1] >= row[p] / 2) b++;
    return [Math.min(a * stride, width), Math.min((b + 1) * stride, width)];
  }
  /* The glyph (index into the spans) whose columns hold pixel x; -1 for none. */
  function glyphAt(spans, x) {
    for (var g = 0; g < (spans || []).length; g++) {
      if (x >= spans[g][0] && x < spans[g][1]) return g;
    }
    return -1;
  }
  function glyphText(strip, g) {
    return g < 0 ? "no glyph (between glyphs or past the last)" :
      "glyph " + (g + 1) + " (" + strip.truth.charAt(g) + ")";
  }

  /* The filter's value: a fixed choice, or "wrong-right:A:B" (view A wrong, view B right),
     one for every ordered pair of views, whatever their readers. */
  function matches(strip) {
    var present = strip.reads.filter(function (r) { return r !== null; });
    var wrong = present.filter(function (r) { return !ok(r, strip.truth); }).length;
    var pair = /^wrong-right:(\d+):(\d+)$/.exec(ui.filter.value);
    if (pair) {
      var a = strip.reads[Number(pair[1])], b = strip.reads[Number(pair[2])];
      return a !== null && b !== null && !ok(a, strip.truth) && ok(b, strip.truth);
    }
    switch (ui.filter.value) {
      case "any-wrong": return wrong > 0;
      case "all-wrong": return present.length > 0 && wrong === present.length;
      case "correct": return present.length > 0 && wrong === 0;
      default: return true;
    }
  }
  function listed() {
    var strips = lengthEntry().strips.map(function (s, i) { return i; });
    var all = lengthEntry().strips;
    strips = strips.filter(function (i) { return matches(all[i]); });
    var order = ui.sort.value;
    if (order !== "index") {
      var conf = function (i) {
        var r = all[i].reads[state.focus];
        return r ? r.confidence : -1;
      };
      strips.sort(function (a, b) {
        return order === "conf-asc" ? conf(a) - conf(b) : conf(b) - conf(a);
      });
    }
    return strips;
  }

  function fillTrains() {
    options(ui.train, D.trains.map(function (g) { return "lengths " + g.train; }), state.train);
    fillEvals();
  }
  function fillEvals() {
    options(ui.evl, group().evals.map(function (e) { return e.eval; }), state.evl);
    var views = evaluation().views;
    var best = views.findIndex(function (v) { return v.has_weights; });
    state.focus = best < 0 ? 0 : best;  // the matrix of the first reader with weights
    options(ui.focus, views.map(function (v) { return v.label; }), state.focus);
    state.focus = Number(ui.focus.value);
    fillPairs(views);
    var start = evaluation().start;  // the longest seen length, on a disagreement if any
    state.length = start ? start.length : 0;
    state.pick = start ? start.strip : null;
    fillLengths();
  }
  /* The filter's "A wrong, B right" choices of this evaluation's views (in their order, so
     the baseline reader wrong and another right comes first); the choice made is kept when
     the new evaluation has it, else the filter goes back to "all". */
  function fillPairs(views) {
    var chosen = ui.filter.value;
    Array.prototype.slice.call(ui.filter.querySelectorAll("option[data-pair]")).forEach(
      function (o) { o.parentNode.removeChild(o); });
    views.forEach(function (a, i) {
      views.forEach(function (b, j) {
        if (i === j) return;
        var o = el("option", { value: "wrong-right:" + i + ":" + j, "data-pair": "" },
          a.label + " wrong, " + b.label + " right");
        ui.filter.appendChild(o);
      });
    });
    ui.filter.value = chosen;
    if (ui.filter.value !== chosen) ui.filter.value = "all";
  }
  function fillLengths() {
    var lengths = evaluation().lengths;
    if (state.length >= lengths.length) state.length = 0;
    options(ui.length, lengths.map(function (l) {
      return l.length + " (" + l.split + ")";
    }), state.length);
    fillStrips(true);
  }
  function fillStrips(reset) {
    var all = lengthEntry().strips, shown = listed();
    var keep = reset ? -1 : state.strip;
    if (state.pick !== null) { keep = state.pick; state.pick = null; state.step = 0; }
    clear(ui.strips);
    shown.forEach(function (i) {
      var s = all[i];
      var marks = s.reads.map(function (r) { return r === null ? "–" : (ok(r, s.truth) ? "✓" : "✗"); });
      var text = "#" + s.index + "  " + s.truth + "  " + marks.join(" ");
      var r = s.reads[state.focus];
      if (r) text += "  " + fmt(r.confidence);
      ui.strips.appendChild(el("option", { value: String(i) }, text));
    });
    ui.count.textContent = shown.length + " of " + all.length + " strips of length " +
      lengthEntry().length + " (" + lengthEntry().split + "); marks: " +
      evaluation().views.map(function (v) { return v.label; }).join(", ");
    if (shown.indexOf(keep) < 0) { keep = shown.length ? shown[0] : null; state.step = 0; }
    state.strip = keep;
    if (keep !== null) ui.strips.value = String(keep);
    render();
  }

  function maxSteps(strip) {
    var n = 1;
    strip.reads.forEach(function (r) { if (r) n = Math.max(n, r.reading.length + 1); });
    return n;
  }

  function render() {
    clear(ui.views); clear(ui.matrix);
    var ev = evaluation();
    ui.note.textContent = ev.left_out ? ev.left_out + " reading(s) left out: their run read " +
      "another strip under the same length and index." : "";
    if (state.strip === null) {
      ui.title.textContent = "No strip of this length matches this filter.";
      ui.step.textContent = ""; ui.prev.disabled = true; ui.next.disabled = true;
      return;
    }
    var strip = lengthEntry().strips[state.strip], total = maxSteps(strip);
    state.step = Math.max(0, Math.min(state.step, total - 1));
    ui.prev.disabled = state.step === 0; ui.next.disabled = state.step >= total - 1;
    ui.step.textContent = "step " + (state.step + 1) + " of " + total;
    ui.step.setAttribute("data-step", String(state.step));
    ui.title.textContent = "Strip #" + strip.index + " of length " + strip.length +
      " (" + (strip.source || "") + "), truth " + strip.truth;
    ev.views.forEach(function (v, i) { ui.views.appendChild(view(v, strip.reads[i], strip)); });
    ui.matrix.appendChild(matrix(ev.views[state.focus], strip.reads[state.focus], strip));
  }

  function stripSvg(strip, read, colour) {
    var img = D.images[strip.image] || {}, w = img.width || 1, h = img.height || 32, top = 10;
    var bandY = top + h + 3, bandH = 7, total = bandY + bandH + 8;
    var svg = sv("svg", {
      viewBox: "0 0 " + w + " " + total, width: String(w * 5), class: "ex-svg",
      role: "img", "aria-label": "strip " + strip.truth
    });
    if (img.png && B64.test(img.png)) {
      svg.appendChild(sv("image", {
        href: "data:image/png;base64," + img.png, x: "0", y: String(top), width: String(w),
        height: String(h), preserveAspectRatio: "none", class: "ex-img"
      }));
    }
    (img.spans || []).forEach(function (sp, g) {
      var now = g === state.step;  // the true glyph of this step: dashed, not filled
      svg.appendChild(sv("rect", {
        x: String(sp[0]), y: String(top), width: String(Math.max(1, sp[1] - sp[0])),
        height: String(h), class: now ? "ex-span ex-true" : "ex-span"
      }));
      svg.appendChild(sv("text", {
        x: String((sp[0] + sp[1]) / 2), y: String(top - 2), class: now ? "ex-glyph ex-now" : "ex-glyph"
      }, strip.truth.charAt(g)));
    });
    var band = sv("g", { class: "ex-band", "data-step": String(state.step) });
    svg.appendChild(sv("rect", {
      x: "0", y: String(bandY), width: String(w), height: String(bandH), class: "ex-band-bg"
    }));
    var all = rows(read);
    if (all && state.step < all.length) {
      var row = all[state.step], top1 = row[peak(row)] || 1, stride = read.stride || 1;
      for (var c = 0; c < row.length; c++) {
        var cw = Math.min(stride, w - c * stride);  // the last column ends with the strip
        if (row[c] <= 0 || cw <= 0) continue;
        band.appendChild(sv("rect", {
          x: String(c * stride), y: String(bandY), width: String(cw), height: String(bandH),
          fill: colour, "fill-opacity": (row[c] / top1).toFixed(3), "data-col": String(c)
        }));
      }
      var p = peak(row), x = Math.min((p + 0.5) * stride, w), look = looked(row, stride, w);
      band.setAttribute("data-peak", String(p));
      band.appendChild(sv("path", {
        d: "M" + x + " " + (bandY + bandH) + " l-3 6 h6 z", class: "ex-peak"
      }));
      // where the reader looks: the peak's columns (at least half its weight), solid
      svg.appendChild(sv("rect", {
        x: String(look[0]), y: String(top), width: String(Math.max(1, look[1] - look[0])),
        height: String(h), class: "ex-look", stroke: colour, fill: colour,
        "data-from": String(look[0]), "data-to": String(look[1])
      }));
    }
    svg.appendChild(band);
    return svg;
  }

  function readingLine(read, strip) {
    var line = el("div", { class: "ex-reading" });
    if (!read) { line.textContent = "this run kept no reading of this strip"; return line; }
    var s = state.step, text = read.reading, steps = read.steps;
    var conf = steps && s < steps.length ? steps[s] : null;
    line.appendChild(el("span", { class: "muted" }, "reading so far: "));
    line.appendChild(el("span", { class: "ex-done" }, text.slice(0, Math.min(s, text.length))));
    if (s < text.length) {
      var right = text.charAt(s) === strip.truth.charAt(s);
      line.appendChild(el("span", { class: "ex-cur " + (right ? "ex-right" : "ex-wrong") }, text.charAt(s)));
      line.appendChild(el("span", { class: "ex-conf" }, "  step " + (s + 1) + ": digit " +
        text.charAt(s) + ", confidence " + fmt(conf) + (right ? "" : " (true glyph: " +
        (strip.truth.charAt(s) || "none") + ")")));
    } else if (s === text.length) {
      line.appendChild(el("span", { class: "ex-cur ex-eos" }, "EOS"));
      line.appendChild(el("span", { class: "ex-conf" }, "  step " + (s + 1) +
        ": end of reading (EOS), confidence " + fmt(conf)));
    } else {
      line.appendChild(el("span", { class: "ex-conf muted" }, "  finished after " +
        (text.length + 1) + " steps"));
    }
    return line;
  }

  function view(v, read, strip) {
    var box = el("div", {
      class: "ex-view", "data-reader": v.reader, "data-run": v.run,
      "data-strip": strip.length + ":" + strip.index, "data-truth": strip.truth
    });
    var head = el("div", { class: "ex-head" });
    var sw = el("span", { class: "swatch" }); sw.style.background = v.colour;
    head.appendChild(sw);
    head.appendChild(el("b", {}, v.label));
    if (read) {
      var good = ok(read, strip.truth);
      head.appendChild(el("span", {}, " read "));
      head.appendChild(el("code", {}, read.reading || "(empty)"));
      head.appendChild(el("span", { class: good ? "kind-correct" : "kind-failure" },
        good ? " correct" : " wrong"));
      head.appendChild(el("span", { class: "muted" }, " · confidence " + fmt(read.confidence)));
    }
    box.appendChild(head);
    box.appendChild(stripSvg(strip, v.has_weights ? read : null, v.colour));
    box.appendChild(readingLine(read, strip));
    var all = rows(read);
    if (!v.has_weights || !all) {
      box.appendChild(el("div", { class: "ex-noattn muted" },
        v.reader + " has no attention to show: this reader has no attention weights."));
    } else if (state.step < all.length) {
      var p = peak(all[state.step]), stride = read.stride || 1;
      var img = D.images[strip.image] || {};
      box.appendChild(el("div", { class: "ex-peak-line muted" }, "attention peak: encoder column " +
        p + " (pixels " + p * stride + "–" + ((p + 1) * stride - 1) + "), weight " +
        fmt(all[state.step][p])));
      if (img.spans) {
        var at = glyphAt(img.spans, Math.min((p + 0.5) * stride, (img.width || 1) - 0.5));
        box.appendChild(el("div", { class: "ex-where" }, "looks at " + glyphText(strip, at) +
          " · true glyph of this step: " + glyphText(strip, state.step < strip.truth.length ?
          state.step : -1) + (at === state.step ? "" : " (not the same)")));
      }
    }
    box.appendChild(el("div", { class: "ex-key muted" }, v.has_weights && all ?
      "solid box: where this reader looks at this step (the attention peak's columns); " +
      "dashed box: the true glyph of this step" : "dashed box: the true glyph of this step"));
    return box;
  }

  function matrix(v, read, strip) {
    var box = el("div", { class: "ex-matrix-box", "data-reader": v.reader });
    var all = rows(read);
    if (!v.has_weights || !all) {
      box.appendChild(el("p", { class: "muted" }, v.label +
        ": no attention weights, so no attention matrix."));
      return box;
    }
    var t = read.columns, cs = 8, left = 30, top = 14, stride = read.stride || 1;
    var svg = sv("svg", {
      viewBox: "0 0 " + (left + t * cs + 2) + " " + (top + all.length * cs + 2),
      width: String(Math.min(560, (left + t * cs + 2) * 2.5)), class: "ex-msvg"
    });
    var img = D.images[strip.image] || {};
    (img.spans || []).forEach(function (sp, g) {
      var a = Math.floor(sp[0] / stride), b = Math.ceil(sp[1] / stride);
      svg.appendChild(sv("rect", {
        x: String(left + a * cs), y: "2", width: String(Math.max(1, b - a) * cs - 1), height: "9",
        class: "ex-mspan"
      }));
      svg.appendChild(sv("text", { x: String(left + (a + b) / 2 * cs), y: "10", class: "ex-mglyph" },
        strip.truth.charAt(g)));
    });
    all.forEach(function (row, s) {
      var g = sv("g", { class: "ex-mrow", "data-step": String(s) });
      var top1 = row[peak(row)] || 1;
      var token = s < read.reading.length ? read.reading.charAt(s) : "EOS";
      g.appendChild(sv("text", { x: String(left - 3), y: String(top + s * cs + 6.5), class: "ex-mlabel" }, token));
      for (var c = 0; c < row.length; c++) {
        g.appendChild(sv("rect", {
          x: String(left + c * cs), y: String(top + s * cs), width: String(cs), height: String(cs),
          fill: v.colour, "fill-opacity": (row[c] / top1).toFixed(3)
        }));
      }
      g.addEventListener("click", function () { state.step = s; render(); });
      svg.appendChild(g);
    });
    if (state.step < all.length) {
      svg.appendChild(sv("rect", {
        x: String(left), y: String(top + state.step * cs), width: String(t * cs),
        height: String(cs), class: "ex-mnow"
      }));
    }
    box.appendChild(el("p", { class: "muted" }, v.label + ": attention matrix (rows: output steps, " +
      "columns: encoder columns; each row shaded relative to its peak; click a row to go to it)"));
    box.appendChild(svg);
    return box;
  }

  function move(by) {
    if (state.strip === null) return;
    var total = maxSteps(lengthEntry().strips[state.strip]);
    var s = Math.max(0, Math.min(total - 1, state.step + by));
    if (s !== state.step) { state.step = s; render(); }
  }

  ui.train.addEventListener("change", function () {
    state.train = Number(ui.train.value); state.evl = 0; fillEvals();
  });
  ui.evl.addEventListener("change", function () { state.evl = Number(ui.evl.value); fillEvals(); });
  ui.length.addEventListener("change", function () {
    state.length = Number(ui.length.value); fillStrips(true);
  });
  // a new filter or order is a new list: the selection goes to its first strip
  ui.filter.addEventListener("change", function () { fillStrips(true); });
  ui.sort.addEventListener("change", function () { fillStrips(true); });
  ui.focus.addEventListener("change", function () {  // the order follows this reader
    state.focus = Number(ui.focus.value); fillStrips(ui.sort.value !== "index");
  });
  ui.strips.addEventListener("change", function () {
    state.strip = Number(ui.strips.value); state.step = 0; render();
  });
  ui.prev.addEventListener("click", function () { move(-1); });
  ui.next.addEventListener("click", function () { move(1); });
  document.addEventListener("keydown", function (e) {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    var t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || (tag === "SELECT" && !(t.size > 1))) return;
    e.preventDefault();
    move(e.key === "ArrowRight" ? 1 : -1);
  });
  fillTrains();
})();
