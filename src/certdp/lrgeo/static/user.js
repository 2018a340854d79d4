/* The LR-Geo user's side of the protocol (paper 003), in the browser.
 *
 * The same computation as certdp's Python user, step for step, so that the page and
 * `certdp lrgeo user` report the same location for the same seed:
 *   src/certdp/lrgeo/user.py     LR set, obfuscation range, table request, costs (Eq. 27), assembly
 *   src/certdp/certify.py        the exact repair of the returned matrix on the LR pairs
 *   src/certdp/audit.py          the exact float64 check (verify, violated)
 *   src/certdp/randomness.py     CounterRNG (seeded runs), inverse-CDF sampling
 * Only the protocol's two messages leave the page (TableRequest, ObfuscationRequest); the true
 * location, the LR set's order and the reported location stay here.
 */
"use strict";

(function (root) {
  // ------------------------------------------------------------------ randomness
  const MASK64 = (1n << 64n) - 1n;
  const GOLDEN = 0x9E3779B97F4A7C15n;
  const TWO53 = 9007199254740992;

  /** SplitMix64 as a counter generator: word i mixes seed + (i + 1) * golden (mod 2^64). */
  class CounterRNG {
    constructor(seed) {
      const s = BigInt(seed);
      if (s < 0n || s > MASK64) throw new Error("seed must be an integer in [0, 2^64)");
      this.seed = s;
      this.counter = 0n;
    }
    word53() {
      this.counter += 1n;
      let z = (this.seed + this.counter * GOLDEN) & MASK64;
      z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64;
      z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64;
      return (z ^ (z >> 31n)) >> 11n;
    }
  }

  /** The operating system's randomness, 53 bits a draw (unseeded runs). */
  class SecureRNG {
    word53() {
      const a = new Uint32Array(2);
      crypto.getRandomValues(a);
      return (BigInt(a[0] >>> 11) << 32n) | BigInt(a[1]);
    }
  }

  function below(rng, n) { return Number((rng.word53() * BigInt(n)) >> 53n); }
  function uniform(rng) { return Number(rng.word53()) / TWO53; }
  function choice(rng, a) { return a[below(rng, a.length)]; }
  function permutation(rng, a) {
    const out = Array.from(a);
    for (let i = out.length - 1; i > 0; i--) {
      const j = below(rng, i + 1);
      const t = out[i]; out[i] = out[j]; out[j] = t;
    }
    return out;
  }

  // ------------------------------------------------------------------ geometry
  const RAD = Math.PI / 180;

  function haversine(lat1d, lon1d, lat2d, lon2d, R) {
    const lat1 = lat1d * RAD, lon1 = lon1d * RAD, lat2 = lat2d * RAD, lon2 = lon2d * RAD;
    const a = Math.sin((lat2 - lat1) / 2), b = Math.sin((lon2 - lon1) / 2);
    const h = a * a + Math.cos(lat1) * Math.cos(lat2) * (b * b);
    return 2 * R * Math.asin(Math.sqrt(Math.min(Math.max(h, 0), 1)));
  }

  /** Shortest paths from `source` over adjacency lists (targets, weights); Infinity beyond
   *  `limit`; stops once every node in `stopAt` (a Set) is settled. */
  function dijkstra(adj, n, source, limit = Infinity, stopAt = null) {
    const dist = new Float64Array(n).fill(Infinity);
    const done = new Uint8Array(n);
    const heapD = [], heapV = [];
    const push = (d, v) => {
      let i = heapD.length; heapD.push(d); heapV.push(v);
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (heapD[p] <= heapD[i]) break;
        [heapD[p], heapD[i]] = [heapD[i], heapD[p]]; [heapV[p], heapV[i]] = [heapV[i], heapV[p]]; i = p;
      }
    };
    const pop = () => {
      const d = heapD[0], v = heapV[0];
      const ld = heapD.pop(), lv = heapV.pop();
      if (heapD.length) {
        heapD[0] = ld; heapV[0] = lv;
        let i = 0;
        for (;;) {
          const l = 2 * i + 1, r = l + 1;
          let m = i;
          if (l < heapD.length && heapD[l] < heapD[m]) m = l;
          if (r < heapD.length && heapD[r] < heapD[m]) m = r;
          if (m === i) break;
          [heapD[m], heapD[i]] = [heapD[i], heapD[m]]; [heapV[m], heapV[i]] = [heapV[i], heapV[m]]; i = m;
        }
      }
      return [d, v];
    };
    let left = stopAt ? stopAt.size : -1;
    dist[source] = 0; push(0, source);
    while (heapD.length) {
      const [d, u] = pop();
      if (done[u]) continue;
      done[u] = 1;
      if (stopAt && stopAt.has(u) && --left === 0) break;
      const [to, w] = adj[u];
      for (let e = 0; e < to.length; e++) {
        const v = to[e], nd = d + w[e];
        if (nd < dist[v] && nd <= limit) { dist[v] = nd; push(nd, v); }
      }
    }
    return dist;
  }

  /** Local equirectangular projection to km (nearest-neighbour searches only), as
   *  certdp.datasets.city.project_km. */
  function projectKm(lat, lon, lat0, R) {
    const k = Math.PI / 180 * R;
    return [lon * k * Math.cos(lat0 * RAD), lat * k];
  }

  // ------------------------------------------------------------------ the world
  /** The public world from GET /world. */
  class World {
    constructor(w) {
      this.name = w.name;
      this.fingerprint = w.fingerprint;
      this.shape = w.shape;
      this.lat0 = w.lat0;
      this.R = w.earth_radius_km;
      this.K = w.latlon.length;
      this.lat = Float64Array.from(w.latlon, (p) => p[0]);
      this.lon = Float64Array.from(w.latlon, (p) => p[1]);
      this.node = Int32Array.from(w.node);
      const g = w.road;
      this.nNodes = g.latlon.length;
      this.roadLat = Float64Array.from(g.latlon, (p) => p[0]);
      this.roadLon = Float64Array.from(g.latlon, (p) => p[1]);
      this.roadCsr = g;
      const lists = Array.from({ length: this.nNodes }, () => [[], []]);
      for (let i = 0; i < this.nNodes; i++) {
        for (let e = g.indptr[i]; e < g.indptr[i + 1]; e++) {
          const j = g.indices[e], len = g.length_km[e];
          lists[i][0].push(j); lists[i][1].push(len);
          lists[j][0].push(i); lists[j][1].push(len);     // scipy's dijkstra(directed=False)
        }
      }
      this.road = lists;
      this._geoInd = new Map();
    }
    haversine(i, k) { return haversine(this.lat[i], this.lon[i], this.lat[k], this.lon[k], this.R); }
    /** Edges between locations within gamma, weighted by their Haversine distance. */
    geoIndGraph(gamma) {
      if (!this._geoInd.has(gamma)) {
        const lists = Array.from({ length: this.K }, () => [[], []]);
        for (let i = 0; i < this.K; i++) {
          for (let j = i + 1; j < this.K; j++) {
            const d = this.haversine(i, j);
            if (d <= gamma) { lists[i][0].push(j); lists[i][1].push(d); lists[j][0].push(i); lists[j][1].push(d); }
          }
        }
        this._geoInd.set(gamma, lists);
      }
      return this._geoInd.get(gamma);
    }
    /** Path distances from `source` in the Geo-Ind graph, Infinity beyond `limit`. */
    pathDistances(gamma, source, limit) {
      if (gamma === Infinity) return Float64Array.from({ length: this.K }, (_, k) => this.haversine(source, k));
      return dijkstra(this.geoIndGraph(gamma), this.K, source, limit * (1 + 1e-12));
    }
    /** Road travel from node `source` (Dijkstra until every node of `targets` is settled). */
    travelFrom(source, targets) { return dijkstra(this.road, this.nNodes, source, Infinity, targets); }
    nearest(x, y) {
      let best = -1, bd = Infinity;
      const [px, py] = [x, y];
      for (let k = 0; k < this.K; k++) {
        const [qx, qy] = projectKm(this.lat[k], this.lon[k], this.lat0, this.R);
        const d = (qx - px) ** 2 + (qy - py) ** 2;
        if (d < bd) { bd = d; best = k; }
      }
      return best;
    }
  }

  /** The parameters from GET /info (the CLI's names), as certdp.lrgeo.user.LRGeoParams. */
  function params(p) {
    const P = {
      epsilon: p.epsilon, gamma: p.eta === null ? Infinity : p.eta, Gamma: p.lr_radius, r_obf: p.r_obf,
      r_exp: p.r_exp, cell: p.table_cell, hide: p.hide,
    };
    P.lrRadius = P.Gamma + P.hide;
    P.circleRadius = 2.0 * P.lrRadius + P.r_obf;
    return P;
  }

  function expFactor(d, P) { return Math.exp(P.epsilon * (P.r_obf - Math.min(d, P.r_obf)) / 2.0); }

  function flatnonzero(n, test) { const out = []; for (let k = 0; k < n; k++) if (test(k)) out.push(k); return out; }

  // ------------------------------------------------------------------ the user
  class User {
    constructor(world, location, P, rng) {
      if (!(Number.isInteger(location) && location >= 0 && location < world.K)) {
        throw new Error(`location must be an index of the world's ${world.K} locations`);
      }
      this.world = world; this.P = P; this.rng = rng; this.location = location;
      this.centre = location;
      if (P.hide > 0) {
        const near = world.pathDistances(P.gamma, location, P.hide);
        this.centre = choice(rng, flatnonzero(world.K, (k) => near[k] <= P.hide));
      }
      const D = world.pathDistances(P.gamma, this.centre, P.lrRadius);
      const lr = flatnonzero(world.K, (k) => D[k] <= P.lrRadius);
      if (lr.length < 2) throw new Error("the LR set has a single location; the server's lr_radius is too small");
      this.lr = permutation(rng, lr);
      this.n = this.lr.length;
      this.row = this.lr.indexOf(location);
      this.D_NV = this.lr.map((i) => Float64Array.from({ length: world.K }, (_, k) => world.haversine(i, k)));
      this.obf = flatnonzero(world.K, (k) => {
        let m = Infinity;
        for (let i = 0; i < this.n; i++) m = Math.min(m, this.D_NV[i][k]);
        return m <= P.r_obf;
      });
      if (this.obf.length === 0) throw new Error("the obfuscation range is empty");
      this.anchor = choice(rng, this.lr);
    }

    tableRequest() {
      const w = this.world;
      return { type: "TableRequest", user: "unassigned", center: [w.lat[this.anchor], w.lon[this.anchor]],
               radius_km: this.P.circleRadius };
    }

    /** The distances among the LR rows (symmetrised, zero diagonal), as LRGeoUser.geometry. */
    distanceMatrix() {
      const n = this.n;
      return this.lr.map((_, i) => Array.from({ length: n }, (_, j) =>
        i === j ? 0.0 : (this.D_NV[i][this.lr[j]] + this.D_NV[j][this.lr[i]]) / 2));
    }

    /** The upload: costs estimated from the table (Eq. 27, lowered to the travel distance). */
    obfuscationRequest(table, name) {
      const w = this.world, P = this.P;
      const need = Array.from(new Set([...this.lr, ...this.obf])).sort((a, b) => a - b);
      for (const v of need) {
        if (haversine(table.center[0], table.center[1], w.lat[v], w.lon[v], w.R) > table.radius_km * (1 + 1e-12)) {
          throw new Error("the requested circle does not cover the LR set and the obfuscation range");
        }
      }
      const F = table.fine_latlon.length;
      if (F === 0) throw new Error("the reference table is empty");
      const fx = new Float64Array(F), fy = new Float64Array(F);
      for (let f = 0; f < F; f++) [fx[f], fy[f]] = projectKm(table.fine_latlon[f][0], table.fine_latlon[f][1], w.lat0, w.R);
      const snap = need.map((v) => {
        const [x, y] = projectKm(w.lat[v], w.lon[v], w.lat0, w.R);
        let best = 0, bd = Infinity;
        for (let f = 0; f < F; f++) {
          const d = (fx[f] - x) ** 2 + (fy[f] - y) ** 2;
          if (d < bd) { bd = d; best = f; }
        }
        return table.fine_node[best];
      });
      // travel from each location's road node: to its snapped node (e) and to the other locations (tc)
      const pos = new Map(need.map((v, t) => [v, t]));
      const targets = new Set([...need.map((v) => w.node[v]), ...snap]);
      const travel = new Map();
      for (const v of need) if (!travel.has(w.node[v])) travel.set(w.node[v], w.travelFrom(w.node[v], targets));
      const e = need.map((v, t) => (w.node[v] === snap[t] ? 0.0 : travel.get(w.node[v])[snap[t]]));
      const beta = new Map();
      for (let t = 0; t < table.pair_key.length; t++) beta.set(table.pair_key[t], table.pair_beta[t]);
      const lookup = (a, b) => {
        if (a === b) return 0.0;
        const key = Math.min(a, b) * table.n_nodes + Math.max(a, b);
        return beta.has(key) ? beta.get(key) : NaN;
      };
      const n = this.n, o = this.obf.length, p = 1.0 / n;
      const D_NO = [], C_NO = [];
      for (let i = 0; i < n; i++) {
        const ri = pos.get(this.lr[i]);
        const drow = [], crow = [];
        for (let c = 0; c < o; c++) {
          const ci = pos.get(this.obf[c]);
          const d = this.D_NV[i][this.obf[c]];
          drow.push(d);
          if (d <= P.r_obf) {
            const b = lookup(snap[ri], snap[ci]);
            if (Number.isNaN(b)) throw new Error("the reference table lacks pairs within r_obf");
            const tc = travel.get(w.node[this.lr[i]])[w.node[this.obf[c]]];
            crow.push(p * Math.min(b + (e[ri] + e[ci]), tc));
          } else {
            crow.push(null);
          }
        }
        D_NO.push(drow); C_NO.push(crow);
      }
      this.D_NO = D_NO;
      return { type: "ObfuscationRequest", user: name, D_NN: this.distanceMatrix(), columns: this.obf.slice(),
               D_NO, C_NO, p: Array(n).fill(p) };
    }

    /** The raw (n, K) LR matrix from the server's values, as LRGeoUser.assemble. */
    assemble(resp) {
      const w = this.world, P = this.P, K = w.K;
      if (resp.y.length !== K) throw new Error(`y must have K=${K} entries`);
      if (resp.free.length !== this.n || resp.free.some((r) => r.length !== this.obf.length)) {
        throw new Error("the free values do not have the upload's shape");
      }
      return this.lr.map((_, i) => {
        const z = Float64Array.from(resp.y);
        this.obf.forEach((k, c) => {
          const d = this.D_NO[i][c];
          const v = d <= P.r_exp ? resp.free[i][c] : expFactor(d, P) * resp.y[k];
          if (v === null || Number.isNaN(v)) throw new Error("the response lacks a free value");
          z[k] = v;
        });
        return z;
      });
    }

    /** The Geo-Ind pairs (i < j, d <= eta) among the LR rows and their distances. */
    pairs() {
      const D = this.distanceMatrix(), E = [], d = [];
      for (let i = 0; i < this.n; i++) for (let j = i + 1; j < this.n; j++) if (D[i][j] <= this.P.gamma) { E.push([i, j]); d.push(D[i][j]); }
      return [E, d];
    }

    /** The certified LR matrix (certify on the LR pairs) and the mixing it took. */
    mechanism(resp) {
      const [E, d] = this.pairs();
      return certify(this.assemble(resp), this.P.epsilon, E, d);
    }
  }

  // ------------------------------------------------------------------ exact check and repair
  const MARGIN = 1e-9, ROW_SUM_TOL = 1e-9;

  /** x > exp(ed) y, decided exactly (audit.violated). */
  function violated(x, y, ed) {
    const f = Math.exp(ed);
    if (Number.isFinite(f)) return !(x <= f * y || x === 0);
    return !(x === 0 || (y > 0 && Math.log(x) - Math.log(y) <= ed * (1.0 - 1e-11)));
  }

  function rowSum(r) { let s = 0; for (const v of r) s += v; return s; }

  /** audit.verify: rows sum to 1, entries in [0, 1], every pair within exp(eps d) both ways. */
  function verify(Z, eps, E, d) {
    for (const r of Z) {
      if (Math.abs(rowSum(r) - 1.0) > ROW_SUM_TOL) return false;
      for (const v of r) if (!(Number.isFinite(v) && v >= 0 && v <= 1)) return false;
    }
    for (let e = 0; e < E.length; e++) {
      const [a, b] = E[e], ed = eps * d[e];
      for (let k = 0; k < Z[a].length; k++) if (violated(Z[a][k], Z[b][k], ed) || violated(Z[b][k], Z[a][k], ed)) return false;
    }
    return true;
  }

  function components(n, E) {
    const parent = Int32Array.from({ length: n }, (_, i) => i);
    const find = (a) => { while (parent[a] !== a) { parent[a] = parent[parent[a]]; a = parent[a]; } return a; };
    for (const [a, b] of E) { const ra = find(a), rb = find(b); if (ra !== rb) parent[ra] = rb; }
    return Int32Array.from({ length: n }, (_, i) => find(i));
  }

  /** certify.certify: clip and normalise the rows, then mix each connected component with the
   *  uniform mechanism just enough to pass the exact check (at eps (1 - 1e-9) and at eps). */
  function certify(matrix, eps, E, d, maxRounds = 60) {
    const K = matrix[0].length;
    const Z = matrix.map((r) => Float64Array.from(r, (v) => Math.max(v, 0)));
    for (const r of Z) {
      const s = rowSum(r);
      if (s <= 0) r.fill(1.0 / K); else for (let k = 0; k < K; k++) r[k] /= s;
    }
    const epsC = eps * (1.0 - MARGIN);
    const comp = components(Z.length, E);
    const lam = new Map();
    for (let e = 0; e < E.length; e++) {
      const [a, b] = E[e], ed = epsC * d[e], f = Math.exp(ed), w = (f - 1.0) / K;
      const tiny = Math.min(1.0, 2.0 * K * Math.exp(-Math.min(ed, 700.0)));
      for (const [X, Y] of [[Z[a], Z[b]], [Z[b], Z[a]]]) {
        for (let k = 0; k < K; k++) {
          if (!violated(X[k], Y[k], ed)) continue;
          const v = X[k] - f * Y[k];
          const need = Number.isFinite(v) && Number.isFinite(w) ? v / (v + w) : tiny;
          lam.set(comp[a], Math.max(lam.get(comp[a]) || 0, need));
        }
      }
    }
    const weight = (c) => { const l = lam.get(c) || 0; return Math.min(1.0, l * (1.0 + 1e-6) + (l > 0 ? 1e-15 : 0)); };
    let mix = new Map(Array.from(new Set(comp), (c) => [c, weight(c)]));
    for (let round = 1; ; round++) {
      const Z2 = Z.map((r, i) => {
        const l = mix.get(comp[i]);
        if (l >= 1.0) return new Float64Array(K).fill(1.0 / K);
        return l > 0 ? Float64Array.from(r, (v) => (1.0 - l) * v + l / K) : Float64Array.from(r);
      });
      if (verify(Z2, epsC, E, d) && verify(Z2, eps, E, d)) {
        return { Z: Z2, mixing: Math.max(0, ...mix.values()), verified: true };
      }
      if (Array.from(mix.values()).every((l) => l >= 1.0) || round >= maxRounds) {
        throw new Error("could not certify the matrix");
      }
      mix = new Map(Array.from(mix, ([c, l]) => [c, Math.min(1.0, Math.max(2.0 * l, 1e-12))]));
    }
  }

  /** One draw from `row` by inverse CDF (Mechanism.perturb): never an output of probability 0. */
  function sample(row, rng) {
    const cdf = new Float64Array(row.length);
    let s = 0;
    for (let k = 0; k < row.length; k++) { s += row[k]; cdf[k] = s; }
    const u = uniform(rng) * cdf[row.length - 1];
    let idx = 0;
    for (let k = 0; k < row.length; k++) if (cdf[k] <= u) idx++;
    idx = Math.min(idx, row.length - 1);
    if (row[idx] <= 0) { idx = row.length - 1; while (idx > 0 && !(row[idx] > 0)) idx--; }
    return idx;
  }

  // ------------------------------------------------------------------ the protocol over HTTP
  class ServiceError extends Error {}

  async function call(base, method, path, body, token) {
    const headers = {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (token) headers["Authorization"] = `Bearer ${token}`;
    for (let attempt = 0; ; attempt++) {
      let r;
      try {
        r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                       cache: "no-store", credentials: "omit" });
      } catch (exc) {
        if (attempt >= 4) throw new ServiceError(`${method} ${path}: cannot reach the server (${exc})`);
        await new Promise((ok) => setTimeout(ok, 500 * 2 ** attempt));
        continue;
      }
      if ([429, 502, 503, 504].includes(r.status) && attempt < 4) {
        const after = Number(r.headers.get("Retry-After")) || 0;
        await new Promise((ok) => setTimeout(ok, Math.max(after * 1000, 500 * 2 ** attempt)));
        continue;
      }
      const data = await r.json().catch(() => ({}));
      if (!r.ok) throw new ServiceError(`${method} ${path}: HTTP ${r.status}: ${data.error || r.statusText}`);
      return [r.status, data];
    }
  }

  /** Run one user through a round: location is an index of the world's locations; `seed`
   *  (optional) makes the draws those of `certdp lrgeo user --seed`. `progress(text)` is told
   *  each step. Returns the reported location, the user's certified row and what it measured. */
  async function obfuscate(base, world, info, location, { seed = null, progress = () => {} } = {}) {
    const P = params(info.params);
    const rng = seed === null ? new SecureRNG() : new CounterRNG(seed);
    progress("building the LR set and the obfuscation range");
    const user = new User(world, location, P, rng);
    progress(`asking for the reference table of a circle around one of ${user.n} LR locations`);
    const [, grant] = await call(base, "POST", "/table", user.tableRequest());
    progress("estimating the costs from the table");
    const upload = user.obfuscationRequest(grant.table, grant.user);
    progress(`uploading ${user.n} x ${user.obf.length} coefficients`);
    await call(base, "POST", `/upload/${grant.user}`, upload, grant.token);
    let resp;
    for (;;) {
      progress("waiting for the round to be solved");
      const [status, body] = await call(base, "GET", `/result/${grant.user}?wait=10`, undefined, grant.token);
      if (status === 200) { resp = body; break; }
    }
    progress("certifying the matrix");
    const mech = user.mechanism(resp);
    const row = mech.Z[user.row];
    const output = sample(row, rng);
    return { output, lat: world.lat[output], lon: world.lon[output], row, verified: mech.verified,
             mixing: mech.mixing, user: grant.user, status: resp.status, lrSet: user.lr.slice(), n: user.n };
  }

  root.LRGeo = { CounterRNG, SecureRNG, World, User, params, certify, verify, sample, obfuscate, call, projectKm,
                 haversine, below, uniform, ServiceError };
})(typeof window !== "undefined" ? window : globalThis);
