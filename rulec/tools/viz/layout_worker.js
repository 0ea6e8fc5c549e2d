// Layered layout of a DAG, off the main thread: rows by longest path from the leaves, order within a row
// by the barycenter of the sources, two sweeps. Input {key, nodes: [id], edges: [[src, dst]]}; output
// {key, pos: {id: [x, y]}, width, height}.
self.onmessage = function (ev) {
  var msg = ev.data;
  self.postMessage(layout(msg));
};

function layout(msg) {
  var nodes = msg.nodes, edges = msg.edges;
  var index = new Map();
  nodes.forEach(function (id, i) { index.set(id, i); });
  var n = nodes.length;
  var srcs = new Array(n), users = new Array(n), indeg = new Int32Array(n);
  for (var i = 0; i < n; i++) { srcs[i] = []; users[i] = []; }
  edges.forEach(function (e) {
    var a = index.get(e[0]), b = index.get(e[1]);
    if (a === undefined || b === undefined) return;
    srcs[b].push(a); users[a].push(b); indeg[b]++;
  });
  // Kahn: sources (leaves of the UOp graph) first
  var layer = new Int32Array(n), queue = [], head = 0;
  for (var i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
  while (head < queue.length) {
    var v = queue[head++];
    users[v].forEach(function (u) {
      if (layer[v] + 1 > layer[u]) layer[u] = layer[v] + 1;
      if (--indeg[u] === 0) queue.push(u);
    });
  }
  var rows = [];
  for (var i = 0; i < n; i++) { (rows[layer[i]] = rows[layer[i]] || []).push(i); }
  var order = new Float64Array(n);
  rows.forEach(function (row) { row.forEach(function (v, k) { order[v] = k; }); });
  for (var sweep = 0; sweep < 2; sweep++) {
    rows.forEach(function (row, r) {
      if (r === 0) return;
      row.forEach(function (v) {
        var s = srcs[v];
        if (s.length) { var t = 0; s.forEach(function (a) { t += order[a]; }); order[v] = t / s.length; }
      });
      row.sort(function (a, b) { return order[a] - order[b]; });
      row.forEach(function (v, k) { order[v] = k; });
    });
  }
  var pos = {}, width = 0;
  rows.forEach(function (row, r) {
    row.forEach(function (v, k) { pos[nodes[v]] = [k * 150 + 80, r * 70 + 40]; });
    width = Math.max(width, row.length * 150 + 80);
  });
  return {key: msg.key, pos: pos, width: width, height: rows.length * 70 + 60};
}
