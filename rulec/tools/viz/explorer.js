// The rulec explorer: one page over one trace (the data is in the page; nothing is fetched).
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("rulec-data").textContent);
  var T = DATA.trace, X = DATA.extra, NODES = T.nodes;
  var MAX_NODES = X.max_nodes;
  var state = {stage: 0, step: -1, node: null, mode: "graph", tab: "step"};
  var layouts = {};           // stage index -> {pos, width, height} once the worker answered
  var pending = {};
  var worker = makeWorker();
  var $ = function (id) { return document.getElementById(id); };
  var SVGNS = "http://www.w3.org/2000/svg";

  // ---------------------------------------------------------------- graph helpers
  function reach(roots, limit) {
    var seen = new Set(), stack = roots.filter(Boolean).slice();
    while (stack.length && seen.size < (limit || Infinity)) {
      var id = stack.pop();
      if (seen.has(id) || !NODES[id]) continue;
      seen.add(id);
      var s = NODES[id].src;
      for (var i = 0; i < s.length; i++) stack.push(s[i]);
    }
    return seen;
  }
  var unionCache = {};
  function stageUnion(si) {
    if (unionCache[si]) return unionCache[si];
    var st = T.stages[si], roots = [st.input, st.output];
    st.steps.forEach(function (p) { roots.push(p.before, p.after); });
    var all = reach(roots);
    return (unionCache[si] = all);
  }
  function edgesOf(ids) {
    var out = [];
    ids.forEach(function (id) { NODES[id].src.forEach(function (s) { if (ids.has(s)) out.push([s, id]); }); });
    return out;
  }
  // the nodes drawn for the current view: everything when it fits, else the nearest to the focus
  function visibleNodes(si, sj) {
    var all = stageUnion(si), st = T.stages[si];
    if (all.size <= MAX_NODES) return {ids: all, total: all.size};
    var focus = sj >= 0 ? [st.steps[sj].after, st.steps[sj].before] : [st.output, st.input];
    if (state.node && all.has(state.node)) focus.unshift(state.node);
    return {ids: reach(focus, MAX_NODES), total: all.size};
  }

  // ---------------------------------------------------------------- layout, off the main thread
  function makeWorker() {
    try {
      var src = document.getElementById("rulec-worker").textContent;
      var w = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
      w.onmessage = function (ev) { layouts[ev.data.key] = ev.data; delete pending[ev.data.key]; render(); };
      return w;
    } catch (e) {
      return null;  // no workers (an old browser): the layout runs here, in a later task
    }
  }
  // one layout per stage, of every node the stage held: positions stay put from step to step
  function requestLayout(si) {
    var key = "s" + si, ids = stageUnion(si);
    if (layouts[key] || pending[key]) return layouts[key];
    pending[key] = true;
    var msg = {key: key, nodes: Array.from(ids), edges: edgesOf(ids)};
    if (worker) worker.postMessage(msg);
    else setTimeout(function () {
      var f = new Function(document.getElementById("rulec-worker").textContent + "; return layout;")();
      layouts[key] = f(msg); delete pending[key]; render();
    }, 0);
    return null;
  }

  // ---------------------------------------------------------------- rendering
  function opClass(op) {
    if (/^(ADD|SUB|MUL|IDIV|MOD|MAX|NEG|CMPLT|CMPNE|CMPEQ|AND|OR|XOR|WHERE|SHL|SHR|FDIV|EXP2|LOG2|SIN|SQRT|RECIPROCAL|TRUNC|POW|MULACC)$/.test(op)) return "alu";
    if (/^(RESHAPE|EXPAND|PERMUTE|PAD|SHRINK|FLIP)$/.test(op)) return "mov";
    if (/^(BUFFER|DEFINE_GLOBAL|DEFINE_VAR|DEFINE_REG|STORE|LOAD|INDEX|BUFFERIZE|ASSIGN|COPY)$/.test(op)) return "mem";
    if (/^(RANGE|END|REDUCE|REDUCE_AXIS|SPECIAL)$/.test(op)) return "loop";
    if (op === "CONST") return "const";
    return "other";
  }
  function label(id) {
    var n = NODES[id], a = n.arg && n.arg !== "None" ? " " + n.arg : "";
    if (a.length > 18) a = a.slice(0, 17) + "…";
    return n.op + a;
  }
  function render() {
    renderSteps();
    if (state.mode === "columns") renderColumns(); else renderGraph();
    renderSide();
    writeHash();
  }
  function renderGraph() {
    $("columns").style.display = "none";
    var svg = $("graph"); svg.style.display = "";
    var si = state.stage, sj = state.step, st = T.stages[si];
    var vis = visibleNodes(si, sj);
    var banner = $("banner");
    banner.textContent = vis.ids.size < vis.total ? "showing " + vis.ids.size + " of " + vis.total + " nodes" : "";
    banner.style.display = vis.ids.size < vis.total ? "" : "none";
    var lay = requestLayout(si);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    if (!lay) { $("status").textContent = "laying out " + vis.ids.size + " nodes…"; return; }
    $("status").textContent = "";
    var step = sj >= 0 ? st.steps[sj] : null;
    var hot = new Set(step ? step["new"].concat([step.after]) : []);
    var focus = step ? reach([step.before, step.after], 400) : null;
    var outSet = sj < 0 ? reach([st.output]) : null, inSet = sj < 0 ? reach([st.input]) : null;
    var g = document.createElementNS(SVGNS, "g");
    var edges = edgesOf(vis.ids);
    edges.forEach(function (e) {
      var a = lay.pos[e[0]], b = lay.pos[e[1]];
      if (!a || !b) return;
      var l = document.createElementNS(SVGNS, "line");
      l.setAttribute("x1", a[0]); l.setAttribute("y1", a[1] + 12); l.setAttribute("x2", b[0]); l.setAttribute("y2", b[1] - 12);
      l.setAttribute("class", "edge" + (focus && !(focus.has(e[0]) && focus.has(e[1])) ? " dim" : ""));
      g.appendChild(l);
    });
    vis.ids.forEach(function (id) {
      var p = lay.pos[id];
      if (!p) return;
      var cls = "node " + opClass(NODES[id].op);
      if (step) {
        if (id === step.before) cls += " removed";
        else if (hot.has(id)) cls += " changed";
        else if (!focus.has(id)) cls += " dim";
      } else if (outSet && !outSet.has(id)) cls += " removed";
      else if (inSet && !inSet.has(id)) cls += " changed";
      if (id === state.node) cls += " selected";
      var box = document.createElementNS(SVGNS, "g");
      box.setAttribute("class", cls);
      box.setAttribute("data-id", id);
      box.setAttribute("transform", "translate(" + p[0] + "," + p[1] + ")");
      var r = document.createElementNS(SVGNS, "rect");
      r.setAttribute("x", -66); r.setAttribute("y", -12); r.setAttribute("width", 132); r.setAttribute("height", 24); r.setAttribute("rx", 5);
      var t = document.createElementNS(SVGNS, "text");
      t.setAttribute("text-anchor", "middle"); t.setAttribute("y", 4); t.textContent = label(id);
      var tip = document.createElementNS(SVGNS, "title"); tip.textContent = id + " " + NODES[id].op + ":" + NODES[id].dtype + " " + NODES[id].arg;
      box.appendChild(r); box.appendChild(t); box.appendChild(tip);
      box.addEventListener("click", function () { selectNode(id); });
      g.appendChild(box);
    });
    svg.appendChild(g);
    var view = lay.key + "/" + sj;
    if (svg.dataset.view !== view) {  // a new stage or step: frame what it is about; pan and zoom stay until then
      svg.dataset.view = view;
      var box = frame(lay, focus ? Array.from(focus) : Array.from(vis.ids), step ? step.after : st.output);
      svg.setAttribute("viewBox", box.join(" "));
    }
  }
  // the box to show: all of `ids` when that stays readable, else a readable window around `center`
  function frame(lay, ids, center) {
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    ids.forEach(function (id) {
      var p = lay.pos[id];
      if (!p) return;
      x0 = Math.min(x0, p[0]); y0 = Math.min(y0, p[1]); x1 = Math.max(x1, p[0]); y1 = Math.max(y1, p[1]);
    });
    if (x0 === Infinity) return [0, 0, Math.max(lay.width, 400), Math.max(lay.height, 300)];
    var w = Math.max(x1 - x0 + 200, 700), h = Math.max(y1 - y0 + 100, 420);
    if ((w > 2400 || h > 1600) && lay.pos[center]) {
      var c = lay.pos[center];
      return [c[0] - 700, c[1] - 800, 1400, 900];
    }
    return [(x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - h / 2, w, h];
  }
  function renderColumns() {
    $("graph").style.display = "none";
    var box = $("columns"); box.style.display = "";
    box.innerHTML = "";
    $("banner").style.display = "none";
    T.stages.forEach(function (st, si) {
      var col = document.createElement("div"); col.className = "column";
      var h = document.createElement("div"); h.className = "colhead"; h.textContent = (si + 1) + ". " + st.name;
      col.appendChild(h);
      var ids = reach([st.output], 300);
      var has = state.node && stageUnion(si).has(state.node);
      if (has) col.classList.add("has-selected");
      ids.forEach(function (id) {
        var chip = document.createElement("span");
        chip.className = "chip " + opClass(NODES[id].op) + (id === state.node ? " selected" : "");
        chip.textContent = NODES[id].op;
        chip.title = id;
        chip.setAttribute("data-id", id);
        chip.addEventListener("click", function () { selectNode(id); });
        col.appendChild(chip);
      });
      box.appendChild(col);
    });
  }
  function renderSteps() {
    var list = $("steps");
    if (!list.dataset.built) {
      list.dataset.built = "1";
      T.stages.forEach(function (st, si) {
        var h = document.createElement("div");
        h.className = "stage"; h.id = "stage-" + si;
        h.textContent = (si + 1) + ". " + st.name + "  (" + st.steps.length + ")";
        h.title = st.pipeline + " " + st.loc;
        h.addEventListener("click", function () { go(si, -1); });
        list.appendChild(h);
        var ul = document.createElement("div"); ul.className = "steplist"; ul.id = "steps-" + si;
        st.steps.forEach(function (p, sj) {
          var d = document.createElement("div");
          d.className = "step"; d.id = "step-" + si + "-" + sj;
          d.textContent = "#" + (sj + 1) + " " + T.rules[p.rule].name;
          d.addEventListener("click", function (ev) { ev.stopPropagation(); go(si, sj); });
          ul.appendChild(d);
        });
        list.appendChild(ul);
      });
    }
    Array.prototype.forEach.call(list.querySelectorAll(".current"), function (e) { e.classList.remove("current"); });
    Array.prototype.forEach.call(list.querySelectorAll(".open"), function (e) { e.classList.remove("open"); });
    $("steps-" + state.stage).classList.add("open");
    var cur = state.step >= 0 ? $("step-" + state.stage + "-" + state.step) : $("stage-" + state.stage);
    cur.classList.add("current");
    if (cur.scrollIntoViewIfNeeded) cur.scrollIntoViewIfNeeded(); else cur.scrollIntoView({block: "nearest"});
  }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]; }); }
  function tree(id, depth) {
    var lines = [];
    (function walk(n, ind, d) {
      var x = NODES[n];
      lines.push(ind + x.op + ":" + x.dtype.replace(/^dtypes\./, "") + (x.arg && x.arg !== "None" ? " " + x.arg : "") + "  " + n);
      if (d > 0) x.src.forEach(function (s) { walk(s, ind + "  ", d - 1); });
    })(id, "", depth);
    return lines;
  }
  function renderSide() {
    document.querySelectorAll(".tab").forEach(function (t) { t.classList.toggle("active", t.dataset.tab === state.tab); });
    var out = $("side"), st = T.stages[state.stage], html = "";
    if (state.tab === "step") {
      html += "<h3>" + esc(st.pipeline) + " · " + esc(st.name) + "</h3><div class=meta>" + esc(st.kind) + " stage, " +
        (st.seconds * 1e3).toFixed(2) + " ms, " + st.hits + " rewrites · <span class=loc>" + esc(st.loc) + "</span></div>";
      if (state.step >= 0) {
        var p = st.steps[state.step], r = T.rules[p.rule];
        html += "<h3>step #" + (state.step + 1) + ": " + esc(r.id) + "</h3>";
        html += "<div class=meta>" + (p.seconds * 1e6).toFixed(1) + " µs · <a class=yaml-link href='" + esc(X.rule_href[p.rule]) + "'>" +
          esc(r.file + ":" + r.line + ":" + r.col) + "</a> · generated matcher " + (X.rule_matcher[p.rule] ?
          "<a class=matcher-link href='" + esc(X.rule_matcher_href[p.rule]) + "'>" + esc(X.rule_matcher[p.rule]) + "</a>" : "?") + "</div>";
        html += "<pre class=yaml>" + esc(X.rule_text[p.rule] || "") + "</pre>";
        var k = X.step_kernel[state.stage + ":" + state.step];
        if (k !== undefined) html += "<div>produced kernel <a href='#' class=kernel-link data-k=" + k + ">" + esc(T.kernels[k].name) + "</a></div>";
        var before = tree(p.before, 2), after = tree(p.after, 2), newset = new Set(p["new"]);
        html += "<h4>before</h4><pre class=diff>" + before.map(function (l) { return "<span class=del>- " + esc(l) + "</span>"; }).join("") + "</pre>";
        html += "<h4>after</h4><pre class=diff>" + after.map(function (l) {
          var id = l.trim().split(/\s+/).pop();
          return "<span class=" + (newset.has(id) ? "add>+ " : "same>  ") + esc(l) + "</span>";
        }).join("") + "</pre>";
      }
      if (state.node) html += "<h4>selected node</h4><pre>" + esc(tree(state.node, 1).join("\n")) + "</pre>";
    } else if (state.tab === "whynot") {
      html += "<h3>why not</h3>";
      if (!state.node) html += "<p>Select a node to see why the rules of this stage did not rewrite it.</p>";
      else {
        var entries = X.whynot[state.stage + ":" + state.node] || X.whynot["*:" + state.node];
        html += "<pre>" + esc(tree(state.node, 1).join("\n")) + "</pre>";
        if (!entries) html += "<p class=whynot>no rule of this stage has " + esc(NODES[state.node].op) + " at its root, or the node was not in this stage" + (X.whynot_note ? " (" + esc(X.whynot_note) + ")" : "") + "</p>";
        else entries.forEach(function (e) {
          html += "<div class=whynot><b>" + esc(T.rules[e[0]].id) + "</b> <span class=loc>" + esc(T.rules[e[0]].file + ":" + T.rules[e[0]].line) + "</span><pre>" + esc(e[1].join("\n")) + "</pre></div>";
        });
      }
    } else if (state.tab === "kernels") {
      html += "<h3>schedule</h3><ol class=kernels>";
      T.kernels.forEach(function (k, i) {
        html += "<li><a href='#' class=kernel-link data-k=" + i + ">" + esc(k.name) + "</a> " + esc(k.device) + " · compile " + (k.compile_seconds * 1e3).toFixed(1) + " ms · " + k.runs + " run(s), " + (k.run_seconds * 1e3).toFixed(2) + " ms</li>";
      });
      html += "</ol>";
      if (state.kernel !== undefined) html += "<h4>" + esc(T.kernels[state.kernel].name) + " (C)</h4><pre class=code id=kernel-source>" + esc(X.kernel_source[state.kernel]) + "</pre>";
    } else {
      var dead = X.dead.map(function (i) { return T.rules[i]; });
      html += "<h3>rules</h3><table class=stats><tr><th>rule</th><th>hits</th><th>ms</th></tr>";
      T.rules.slice().sort(function (a, b) { return b.seconds - a.seconds; }).forEach(function (r) {
        html += "<tr" + (r.hits ? "" : " class=deadrow") + "><td>" + esc(r.id) + "</td><td>" + r.hits + "</td><td>" + (r.seconds * 1e3).toFixed(2) + "</td></tr>";
      });
      html += "</table><h3 id=dead-title>dead rules (" + dead.length + ")</h3><ul class=dead>" + dead.map(function (r) {
        return "<li>" + esc(r.id) + " <span class=loc>" + esc(r.file + ":" + r.line) + "</span></li>"; }).join("") + "</ul>";
    }
    out.innerHTML = html;
    out.querySelectorAll(".kernel-link").forEach(function (a) {
      a.addEventListener("click", function (ev) { ev.preventDefault(); state.tab = "kernels"; state.kernel = +a.dataset.k; render(); });
    });
  }

  // ---------------------------------------------------------------- navigation
  function go(si, sj) {
    state.stage = Math.max(0, Math.min(T.stages.length - 1, si));
    state.step = Math.max(-1, Math.min(T.stages[state.stage].steps.length - 1, sj));
    render();
  }
  function next(d) {
    var si = state.stage, sj = state.step + d;
    if (sj >= T.stages[si].steps.length) { si++; sj = -1; }
    else if (sj < -1) { si--; if (si >= 0) sj = T.stages[si].steps.length - 1; }
    if (si < 0 || si >= T.stages.length) return;
    go(si, sj);
  }
  function selectNode(id) { state.node = id; render(); }
  document.addEventListener("keydown", function (ev) {
    if (ev.target.tagName === "INPUT") return;
    if (ev.key === "ArrowDown" || ev.key === "j") { next(1); ev.preventDefault(); }
    else if (ev.key === "ArrowUp" || ev.key === "k") { next(-1); ev.preventDefault(); }
    else if (ev.key === "ArrowRight" || ev.key === "l") { go(state.stage + 1, -1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft" || ev.key === "h") { go(state.stage - 1, -1); ev.preventDefault(); }
    else if (ev.key === "c") { state.mode = state.mode === "columns" ? "graph" : "columns"; render(); }
    else if (ev.key === "/") { $("search").focus(); ev.preventDefault(); }
  });
  document.querySelectorAll(".tab").forEach(function (t) {
    t.addEventListener("click", function () { state.tab = t.dataset.tab; render(); });
  });
  $("mode").addEventListener("click", function () { state.mode = state.mode === "columns" ? "graph" : "columns"; render(); });

  // search: a rule (id or name), an op, a node id, or file:line
  function search(q) {
    var res = [], ql = q.trim().toLowerCase();
    if (!ql) return res;
    T.stages.forEach(function (st, si) {
      st.steps.forEach(function (p, sj) {
        var r = T.rules[p.rule], loc = (r.file + ":" + r.line).toLowerCase();
        var hit = r.id.toLowerCase().indexOf(ql) >= 0 || loc === ql || loc.endsWith(ql) && ql.indexOf(":") > 0 ||
          p.before.indexOf(ql) === 0 || p.after.indexOf(ql) === 0 || NODES[p.after].op.toLowerCase() === ql || NODES[p.before].op.toLowerCase() === ql;
        if (hit && res.length < 200) res.push({si: si, sj: sj, text: (si + 1) + "." + st.name + " #" + (sj + 1) + " " + r.id});
      });
    });
    if (/^n[0-9a-f]{3,}$/.test(ql)) {
      T.stages.forEach(function (st, si) {
        stageUnion(si).forEach(function (id) {
          if (id.indexOf(ql) === 0 && res.length < 200) res.push({si: si, sj: -1, node: id, text: (si + 1) + "." + st.name + ": node " + id});
        });
      });
    }
    return res;
  }
  $("search").addEventListener("input", function () {
    var res = search(this.value), box = $("results");
    box.innerHTML = "";
    res.forEach(function (r) {
      var d = document.createElement("div"); d.className = "result"; d.textContent = r.text;
      d.addEventListener("click", function () { if (r.node) state.node = r.node; go(r.si, r.sj); });
      box.appendChild(d);
    });
    box.style.display = res.length ? "" : "none";
    state.q = this.value;
  });

  // deep links: #stage=3&step=5&node=n…&tab=whynot&mode=columns&q=…
  function writeHash() {
    var h = "stage=" + (state.stage + 1) + "&step=" + (state.step + 1);
    if (state.node) h += "&node=" + state.node;
    if (state.tab !== "step") h += "&tab=" + state.tab;
    if (state.mode !== "graph") h += "&mode=" + state.mode;
    if (state.q) h += "&q=" + encodeURIComponent(state.q);
    if (location.hash.slice(1) !== h) history.replaceState(null, "", "#" + h);
  }
  function readHash() {
    var h = {};
    location.hash.slice(1).split("&").forEach(function (kv) { var p = kv.split("="); if (p[0]) h[p[0]] = decodeURIComponent(p[1] || ""); });
    if (h.stage) state.stage = Math.max(0, Math.min(T.stages.length - 1, (+h.stage || 1) - 1));
    if (h.step) state.step = Math.max(-1, Math.min(T.stages[state.stage].steps.length - 1, (+h.step || 0) - 1));
    if (h.node && NODES[h.node]) state.node = h.node;
    if (h.tab) state.tab = h.tab;
    if (h.mode) state.mode = h.mode;
    if (h.q) { state.q = h.q; $("search").value = h.q; $("search").dispatchEvent(new Event("input")); }
  }

  // pan and zoom of the graph
  (function () {
    var svg = $("graph"), drag = null;
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var vb = svg.viewBox.baseVal, f = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
      var r = svg.getBoundingClientRect(), mx = vb.x + (ev.clientX - r.left) / r.width * vb.width, my = vb.y + (ev.clientY - r.top) / r.height * vb.height;
      svg.setAttribute("viewBox", [mx - (mx - vb.x) * f, my - (my - vb.y) * f, vb.width * f, vb.height * f].join(" "));
    }, {passive: false});
    svg.addEventListener("mousedown", function (ev) { drag = [ev.clientX, ev.clientY]; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var vb = svg.viewBox.baseVal, r = svg.getBoundingClientRect();
      var dx = (ev.clientX - drag[0]) / r.width * vb.width, dy = (ev.clientY - drag[1]) / r.height * vb.height;
      svg.setAttribute("viewBox", [vb.x - dx, vb.y - dy, vb.width, vb.height].join(" "));
      drag = [ev.clientX, ev.clientY];
    });
  })();

  $("title").textContent = "rulec explorer · " + (T.program || "trace") + " · " + T.stages.length + " stages, " +
    T.stages.reduce(function (a, s) { return a + s.steps.length; }, 0) + " steps, " + Object.keys(NODES).length + " nodes";
  readHash();
  if (!T.stages.length) { $("status").textContent = "this trace has no stages"; }
  else render();
  window.rulecExplorer = {state: state, go: go, next: next, selectNode: selectNode, layouts: layouts};
})();
