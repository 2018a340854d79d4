/* The LR-Geo page: the city drawn from the server's public world (road network and grid of
 * locations), a click picks the user's location, and user.js runs the protocol. Nothing is
 * fetched from outside this server (the page's Content-Security-Policy says so too). */
"use strict";

(async function () {
  const L = window.LRGeo;
  const $ = (id) => document.getElementById(id);
  const canvas = $("map"), ctx = canvas.getContext("2d");
  const query = new URLSearchParams(window.location.search);
  if (query.has("seed")) $("seed").value = query.get("seed");
  let world, info, picked = null, result = null, view = null;

  function status(text, state = "busy") { $("status").textContent = text; $("status").dataset.state = state; }

  try {
    info = (await L.call("", "GET", "/info"))[1];
    world = new L.World((await L.call("", "GET", "/world"))[1]);
  } catch (exc) {
    status(`Could not load the city: ${exc.message}`, "error");
    return;
  }

  // ------------------------------------------------------------------ projection
  function makeView() {
    const [rows, cols] = world.shape;
    let latMin = Infinity, latMax = -Infinity, lonMin = Infinity, lonMax = -Infinity;
    for (let k = 0; k < world.K; k++) {
      latMin = Math.min(latMin, world.lat[k]); latMax = Math.max(latMax, world.lat[k]);
      lonMin = Math.min(lonMin, world.lon[k]); lonMax = Math.max(lonMax, world.lon[k]);
    }
    const dlat = rows > 1 ? (latMax - latMin) / (rows - 1) : 0.01, dlon = cols > 1 ? (lonMax - lonMin) / (cols - 1) : 0.01;
    const cosl = Math.cos(world.lat0 * Math.PI / 180), pad = 12;
    const spanX = (lonMax - lonMin + dlon) * cosl, spanY = latMax - latMin + dlat;
    const scale = Math.min((canvas.width - 2 * pad) / spanX, (canvas.height - 2 * pad) / spanY);
    canvas.height = Math.round(spanY * scale + 2 * pad);
    const west = lonMin - dlon / 2, north = latMax + dlat / 2;
    return {
      dlat, dlon, cosl, pad, scale,
      x: (lon) => pad + (lon - west) * cosl * scale,
      y: (lat) => pad + (north - lat) * scale,
      lon: (x) => west + (x - pad) / (cosl * scale),
      lat: (y) => north - (y - pad) / scale,
    };
  }

  function draw() {
    const v = view;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const w = v.dlon * v.cosl * v.scale, h = v.dlat * v.scale;
    const row = result ? result.row : null;
    const top = row ? Math.max(...row) : 1;
    for (let k = 0; k < world.K; k++) {
      const x = v.x(world.lon[k]) - w / 2, y = v.y(world.lat[k]) - h / 2;
      if (row && row[k] > 0) {   // log scale over six orders of magnitude below the likeliest cell
        const t = Math.max(0, 1 + Math.log10(row[k] / top) / 6);
        ctx.fillStyle = `rgba(253, 126, 20, ${0.08 + 0.85 * t})`;
        ctx.fillRect(x, y, w, h);
      }
      ctx.strokeStyle = "rgba(0, 0, 0, 0.08)";
      ctx.strokeRect(x, y, w, h);
    }
    ctx.strokeStyle = "rgba(60, 60, 60, 0.55)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    const g = world.roadCsr;
    for (let i = 0; i < world.nNodes; i++) {
      for (let e = g.indptr[i]; e < g.indptr[i + 1]; e++) {
        const j = g.indices[e];
        if (j < i) continue;
        ctx.moveTo(v.x(world.roadLon[i]), v.y(world.roadLat[i]));
        ctx.lineTo(v.x(world.roadLon[j]), v.y(world.roadLat[j]));
      }
    }
    ctx.stroke();
    const dot = (k, colour, r) => {
      ctx.beginPath();
      ctx.arc(v.x(world.lon[k]), v.y(world.lat[k]), r, 0, 2 * Math.PI);
      ctx.fillStyle = colour; ctx.fill();
      ctx.lineWidth = 2; ctx.strokeStyle = "#fff"; ctx.stroke();
    };
    if (picked !== null) dot(picked, "#0a58ca", Math.max(5, Math.min(w, h) / 4));
    if (result) dot(result.output, "#d63384", Math.max(5, Math.min(w, h) / 4));
  }

  /** Where location k's centre is drawn, in CSS pixels from the map's top left corner. */
  function pixelOf(k) {
    const r = canvas.getBoundingClientRect();
    return { x: view.x(world.lon[k]) * r.width / canvas.width, y: view.y(world.lat[k]) * r.height / canvas.height };
  }

  view = makeView();
  draw();
  $("world").textContent = `${world.name}: ${world.K} locations on a ${world.shape[0]} x ${world.shape[1]} grid, ` +
    `${world.nNodes} road nodes. Privacy: epsilon ${info.params.epsilon.toPrecision(3)} per km within ` +
    `${info.params.eta === null ? "any distance" : info.params.eta.toPrecision(3) + " km"}.`;
  status("Pick your location on the map.", "idle");

  canvas.addEventListener("click", (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = (ev.clientX - r.left) * canvas.width / r.width, y = (ev.clientY - r.top) * canvas.height / r.height;
    const [px, py] = L.projectKm(view.lat(y), view.lon(x), world.lat0, world.R);
    picked = world.nearest(px, py);
    result = null;
    $("result").hidden = true;
    $("picked").textContent = `Your location: cell ${picked} (${world.lat[picked].toFixed(5)}, ` +
      `${world.lon[picked].toFixed(5)}). It stays on this page.`;
    $("go").disabled = false;
    status("Ready: press the button.", "idle");
    draw();
  });

  function seed() {
    const s = $("seed").value.trim();
    if (s === "") return null;
    if (!/^\d{1,20}$/.test(s) || BigInt(s) >= (1n << 64n)) throw new Error("the seed must be a whole number below 2^64");
    return s;
  }

  $("go").addEventListener("click", async () => {
    if (picked === null) return;
    $("go").disabled = true;
    result = null;
    $("result").hidden = true;
    try {
      const r = await L.obfuscate("", world, info, picked, { seed: seed(), progress: (t) => status(`${t} ...`) });
      result = r;
      const km = L.haversine(world.lat[picked], world.lon[picked], world.lat[r.output], world.lon[r.output], world.R);
      let expected = 0;
      for (let k = 0; k < world.K; k++) {
        expected += r.row[k] * L.haversine(world.lat[picked], world.lon[picked], world.lat[k], world.lon[k], world.R);
      }
      const box = $("result");
      box.replaceChildren();
      const dl = document.createElement("dl");
      for (const [term, value] of [
        ["Reported location", `cell ${r.output} (${r.lat.toFixed(5)}, ${r.lon.toFixed(5)}), ${km.toFixed(3)} km from you`],
        ["Chance of reporting your own cell", r.row[picked].toPrecision(4)],
        ["Expected distance of a report from you", `${expected.toFixed(3)} km`],
        ["Your matrix", `${r.verified ? "passes" : "FAILS"} the exact Geo-Ind check on your ${r.n} LR locations ` +
          `(mixing ${r.mixing.toExponential(2)}); round ${r.status}`],
      ]) {
        const dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = term; dd.textContent = value;
        dl.append(dt, dd);
      }
      box.append(dl);
      box.dataset.output = String(r.output);
      box.hidden = false;
      status("Done: the map shades your obfuscation distribution.", "done");
    } catch (exc) {
      status(exc.message, "error");
    } finally {
      $("go").disabled = false;
      draw();
    }
  });

  window.lrgeoPage = { pixelOf, world: () => world, result: () => result };
})();
