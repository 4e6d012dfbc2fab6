// The page of `omnivoice serve`: a playground on the server's public API, nothing else.
//
// GET /v1/omnivoice/schema gives the settings, presets, voice-design vocabulary and languages;
// GET/POST/DELETE /v1/audio/voices the voices; POST /v1/audio/speech the audio. A second client
// can do all this page does. The API key, when the server wants one, is asked for once and kept
// in sessionStorage (this tab only), sent as `Authorization: Bearer`, never put in a URL.
//
// Playback while the reply streams: the speech is asked for as a streamed WAV (16-bit PCM after a
// header that gives the rate). Each piece's samples are played through Web Audio as they arrive,
// so the first piece is heard while the rest is generated; the same bytes are kept, and at the end
// they become one WAV file (the header with its real sizes: the file the API gives with
// "stream": false) in the <audio> element, to replay, seek and download. MediaSource cannot
// take WAV or PCM, and mp3 / opus through it is not in every browser: this works in all of them.
"use strict";

(() => {
  const KEY_STORE = "omnivoice.apiKey";
  const $ = (id) => document.getElementById(id);
  const state = {
    schema: null, // GET /v1/omnivoice/schema
    voices: [], // GET /v1/audio/voices
    take: null, // {body, seed, rate, chunks: [Uint8Array], bytes, url}
    run: null, // {controller, player} of the request being played
    clip: null, // the recording to save as a voice (a File)
    recorder: null,
    keyPrompt: null, // the pending promise of the key dialog
  };

  // ------------------------------------------------------------------ the API

  class ApiFailure extends Error {
    constructor(status, message, param, code) {
      super(message);
      this.status = status;
      this.param = param || null;
      this.code = code || null;
    }
  }

  function authHeaders() {
    const key = sessionStorage.getItem(KEY_STORE);
    return key ? { Authorization: "Bearer " + key } : {};
  }

  async function failure(response) {
    const text = await response.text().catch(() => "");
    try {
      const e = JSON.parse(text).error;
      if (e && e.message) return new ApiFailure(response.status, e.message, e.param, e.code);
    } catch (_) {
      // not the API's JSON envelope (a proxy's page): the status line says what happened
    }
    const words = text.trim().slice(0, 200) || response.statusText || "no reply body";
    return new ApiFailure(response.status, `the server answered ${response.status}: ${words}`);
  }

  // fetch with the key; a 401 asks for the key (once for all callers) and tries again
  async function api(path, options = {}) {
    for (;;) {
      let response;
      try {
        response = await fetch(path, { ...options, headers: { ...(options.headers || {}), ...authHeaders() } });
      } catch (e) {
        if (e.name === "AbortError") throw e;
        throw new ApiFailure(0, `cannot reach the server (${e.message}): is omnivoice serve still running?`);
      }
      if (response.status === 401) {
        const refused = await failure(response);
        if (await askKey(refused)) continue;
        throw refused;
      }
      if (!response.ok) throw await failure(response);
      return response;
    }
  }

  // `refused`: the 401 that asks (none: the person opened the dialog)
  function askKey(refused) {
    if (state.keyPrompt) return state.keyPrompt;
    const dialog = $("key-dialog");
    let why = "The key this tab sends to the server (omnivoice serve --api-key).";
    if (refused && refused.code === "missing_api_key") why = "This server needs an API key (omnivoice serve --api-key).";
    else if (refused) why = `The server says: ${refused.message}.`;
    $("key-why").textContent = why;
    $("api-key").value = "";
    state.keyPrompt = new Promise((resolve) => {
      const done = (ok) => {
        dialog.removeEventListener("close", onClose);
        state.keyPrompt = null;
        resolve(ok);
      };
      const onClose = () => {
        const key = dialog.returnValue === "save" ? $("api-key").value.trim() : "";
        if (key) sessionStorage.setItem(KEY_STORE, key);
        done(Boolean(key));
      };
      dialog.addEventListener("close", onClose);
    });
    dialog.showModal();
    $("api-key").focus();
    return state.keyPrompt;
  }

  function wireKeyDialog() {
    const dialog = $("key-dialog");
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      if ($("api-key").value.trim()) dialog.close("save");
    });
    $("key-cancel").addEventListener("click", () => dialog.close("cancel"));
    $("key-forget").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORE);
      dialog.close("cancel");
    });
    $("key-button").addEventListener("click", () => {
      askKey(null).then((ok) => ok && boot());
    });
  }

  // ------------------------------------------------------------------ errors next to the field

  const FIELD_OF = {
    input: "text", voice: "voice", instruct: "design", instructions: "design", lang: "lang", seed: "seed",
    preset: "preset", model: "preset", response_format: "format", name: "voice-name", file: "upload",
    ref_text: "ref-text",
  };
  const ERROR_OF = {
    text: "text-error", voice: "voice-error", design: "instruct-error", lang: "lang-error", seed: "seed-error",
    preset: "preset-error", "voice-name": "name-error", upload: "file-error", "ref-text": "ref-text-error",
  };

  function fieldFor(param) {
    if (!param) return null;
    if (FIELD_OF[param]) return $(FIELD_OF[param]);
    return document.querySelector(`[data-testid="setting-${CSS.escape(param)}"]`);
  }

  function clearErrors() {
    const area = $("error");
    area.hidden = true;
    area.textContent = "";
    for (const p of document.querySelectorAll(".field-error")) {
      p.hidden = true;
      p.textContent = "";
    }
    for (const el of document.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  }

  function showError(error) {
    const message = error instanceof ApiFailure || error instanceof Error ? error.message : String(error);
    const area = $("error");
    area.textContent = message;
    area.hidden = false;
    const field = fieldFor(error.param);
    if (!field) return;
    field.setAttribute("aria-invalid", "true");
    const slot = $(ERROR_OF[field.id] || `${field.id}-error`);
    if (slot) {
      slot.textContent = message;
      slot.hidden = false;
    }
    const details = field.closest("details");
    if (details) details.open = true;
    if (field.hidden) return;
    field.focus({ preventScroll: true });
  }

  // ------------------------------------------------------------------ building the page from the schema

  function option(value, label) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = label;
    return o;
  }

  function element(tag, props = {}, children = []) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props)) {
      if (k === "text") el.textContent = v;
      else if (k === "class") el.className = v;
      else el.setAttribute(k, v);
    }
    for (const child of children) el.append(child);
    return el;
  }

  const DESIGN = ":design"; // the voice choice "design a voice" (no voice name has a ':')
  const OWN_CONTROLS = new Set(["lang", "instruct", "seed"]); // they have their own place on the page

  function shownDefault(key, spec) {
    const server = state.schema.server;
    if (key in server) return `server: ${server[key]}`;
    if (spec.default_help) return spec.default_help;
    return spec.default === null ? "none" : String(spec.default);
  }

  function buildSettings() {
    const box = $("setting-fields");
    box.replaceChildren();
    for (const [key, spec] of Object.entries(state.schema.settings)) {
      if (OWN_CONTROLS.has(key)) continue;
      const id = `setting-${key}`;
      const help = element("p", { class: "hint", id: `${id}-help`,
        text: `${spec.help} Allowed: ${spec.allowed}${bounds(spec)}. Default: ${shownDefault(key, spec)}.` });
      let control;
      if (spec.type === "boolean") {
        control = element("select", { id });
        const current = key in state.schema.server ? state.schema.server[key] : spec.default;
        control.append(option("", `server's (${current ? "on" : "off"})`), option("true", "on"), option("false", "off"));
      } else {
        control = element("input", { id, type: "text", autocomplete: "off", spellcheck: "false",
          inputmode: spec.type === "integer" ? "numeric" : "decimal", placeholder: shownDefault(key, spec) });
      }
      control.dataset.testid = id;
      control.dataset.key = key;
      control.setAttribute("aria-describedby", `${id}-help ${id}-error`);
      const label = element("label", { for: id, text: key.replaceAll("_", " ") });
      const err = element("p", { class: "field-error", id: `${id}-error` });
      err.hidden = true;
      box.append(element("div", { class: "field" }, [label, control, help, err]));
    }
    const presets = $("preset");
    presets.replaceChildren(option("", "none (the server's settings)"));
    for (const p of state.schema.presets) {
      presets.append(option(p.name, p.error ? `${p.name} (broken)` : `${p.name}: ${p.description || ""}`));
    }
    describePreset();
  }

  function bounds(spec) {
    const parts = [];
    if (spec.low !== undefined) parts.push(`at least ${spec.low}`);
    if (spec.high !== undefined) parts.push(`at most ${spec.high}`);
    return parts.length ? ` (${parts.join(", ")})` : "";
  }

  function describePreset() {
    const name = $("preset").value;
    const found = state.schema.presets.find((p) => p.name === name);
    let text = "";
    if (found && found.error) text = found.error;
    else if (found) text = "Sets " + Object.entries(found.settings).map(([k, v]) => `${k} ${v}`).join(", ") + ".";
    $("preset-about").textContent = text;
  }

  function buildDesign() {
    const box = $("design-fields");
    box.replaceChildren();
    for (const cat of state.schema.voice_design) {
      const id = `design-${cat.id}`;
      const select = element("select", { id });
      select.dataset.testid = id;
      select.dataset.only = cat.only || "";
      select.append(option("", "any"));
      for (const item of cat.items) {
        const value = item.en || item.zh;
        select.append(option(value, item.en && item.zh ? `${item.en} (${item.zh})` : value));
      }
      select.addEventListener("change", () => {
        if (!select.value || !cat.only) return;
        for (const other of box.querySelectorAll("select")) {
          if (other !== select && other.dataset.only && other.dataset.only !== cat.only) other.value = "";
        }
      });
      box.append(element("div", { class: "field" }, [element("label", { for: id, text: cat.name }), select]));
    }
  }

  function buildLanguages() {
    const list = $("languages");
    list.replaceChildren(...state.schema.languages.map((l) => option(l.code, l.name)));
  }

  function buildFormats() {
    const select = $("format");
    const previous = select.value || "wav";
    select.replaceChildren(...state.schema.speech.response_formats.map((f) => option(f, f)));
    select.value = state.schema.speech.response_formats.includes(previous) ? previous : "wav";
  }

  function countChars() {
    const n = [...$("text").value].length; // code points, as the server counts
    const max = state.schema ? state.schema.limits.max_input_chars : null;
    const count = $("count");
    count.textContent = max ? `${n} / ${max} characters` : `${n} characters`;
    count.classList.toggle("over", Boolean(max && n > max));
  }

  // ------------------------------------------------------------------ voices

  async function loadVoices(select) {
    const data = await (await api("/v1/audio/voices")).json();
    state.voices = data.voices;
    const box = $("voice");
    const keep = select || box.value || "auto";
    const saved = element("optgroup", { label: "Saved voices" });
    const openai = element("optgroup", { label: "OpenAI names" });
    box.replaceChildren(option("auto", "Auto (a new voice each seed)"), option(DESIGN, "Design a voice…"));
    for (const v of state.voices) {
      if (v.type === "saved") saved.append(option(v.id, `${v.name} (${v.seconds ?? "?"} s)`));
      if (v.type === "openai") openai.append(option(v.id, `${v.name}: ${v.instruct}`));
    }
    if (saved.children.length) box.append(saved);
    if (openai.children.length) box.append(openai);
    box.value = [...box.options].some((o) => o.value === keep) ? keep : "auto";
    voiceChanged();
    listSaved();
  }

  function listSaved() {
    const list = $("saved");
    list.replaceChildren();
    const saved = state.voices.filter((v) => v.type === "saved");
    if (!saved.length) list.append(element("li", { class: "hint", text: "none yet" }));
    for (const v of saved) {
      const use = element("button", { type: "button", class: "quiet", text: "Use", "aria-label": `Use voice ${v.name}` });
      use.addEventListener("click", () => {
        $("voice").value = v.id;
        voiceChanged();
      });
      const del = element("button", { type: "button", class: "quiet danger", text: "Delete",
        "aria-label": `Delete voice ${v.name}` });
      del.dataset.testid = "delete-voice";
      del.dataset.voice = v.id;
      del.addEventListener("click", () => deleteVoice(v.id));
      const item = element("li", {}, [element("span", { text: `${v.name} · ${v.seconds ?? "?"} s` }), use, del]);
      item.dataset.testid = "saved-voice";
      item.dataset.voice = v.id;
      list.append(item);
    }
  }

  function voiceChanged() {
    $("design").hidden = $("voice").value !== DESIGN;
  }

  async function deleteVoice(name) {
    if (!window.confirm(`Delete the saved voice "${name}"? This cannot be undone.`)) return;
    clearErrors();
    try {
      await api(`/v1/audio/voices/${encodeURIComponent(name)}`, { method: "DELETE" });
      $("clone-status").textContent = `Deleted voice ${name}.`;
      await loadVoices($("voice").value === name ? "auto" : undefined);
    } catch (e) {
      showError(e);
    }
  }

  function setClip(file, label) {
    state.clip = file;
    const clip = $("clip");
    if (clip.src) URL.revokeObjectURL(clip.src);
    clip.src = URL.createObjectURL(file);
    clip.hidden = false;
    $("clip-name").textContent = label;
    if (!$("voice-name").value) $("voice-name").value = file.name.replace(/\.[^.]*$/, "").replace(/[^\w-]+/g, "-");
  }

  async function saveVoice() {
    clearErrors();
    const name = $("voice-name").value.trim();
    if (!state.clip) {
      showError(new ApiFailure(0, "record or choose a recording first (3-10 s of speech)", "file"));
      return;
    }
    const form = new FormData();
    form.append("name", name);
    form.append("file", state.clip, state.clip.name);
    const transcript = $("ref-text").value.trim();
    if (transcript) form.append("ref_text", transcript);
    const button = $("save-voice");
    button.disabled = true;
    $("clone-status").textContent = "Saving…";
    try {
      const saved = await (await api("/v1/audio/voices", { method: "POST", body: form })).json();
      const warned = saved.warnings && saved.warnings.length ? ` (${saved.warnings.join("; ")})` : "";
      $("clone-status").textContent = `Saved voice ${saved.name}: ${saved.seconds} s${warned}.`;
      await loadVoices(saved.id);
    } catch (e) {
      $("clone-status").textContent = "";
      showError(e);
    } finally {
      button.disabled = false;
    }
  }

  // the microphone: MediaRecorder's clip (webm / ogg), decoded here and sent as a 16-bit WAV (the
  // server reads WAV, FLAC, OGG, MP3, not webm)
  async function toggleRecord() {
    const button = $("record");
    if (state.recorder) {
      state.recorder.stop();
      return;
    }
    clearErrors();
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      showError(new ApiFailure(0, "this browser cannot record here (it needs https or localhost): choose a file", "file"));
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (e) {
      showError(new ApiFailure(0, `no microphone: ${e.message}`, "file"));
      return;
    }
    const recorder = new MediaRecorder(stream);
    const parts = [];
    recorder.ondataavailable = (event) => parts.push(event.data);
    recorder.onstop = async () => {
      stream.getTracks().forEach((t) => t.stop());
      state.recorder = null;
      button.textContent = "Record";
      button.setAttribute("aria-pressed", "false");
      try {
        const raw = await new Blob(parts).arrayBuffer();
        const ctx = new (window.AudioContext || window.webkitAudioContext)();
        const decoded = await ctx.decodeAudioData(raw);
        ctx.close();
        const wav = wavFile([floatToPcm16(mixDown(decoded))], decoded.sampleRate);
        setClip(new File([wav], "recording.wav", { type: "audio/wav" }), `recording, ${decoded.duration.toFixed(1)} s`);
      } catch (e) {
        showError(new ApiFailure(0, `the recording cannot be read: ${e.message}`, "file"));
      }
    };
    state.recorder = recorder;
    recorder.start();
    button.textContent = "Stop recording";
    button.setAttribute("aria-pressed", "true");
  }

  function mixDown(buffer) {
    const out = new Float32Array(buffer.length);
    for (let c = 0; c < buffer.numberOfChannels; c++) {
      const data = buffer.getChannelData(c);
      for (let i = 0; i < out.length; i++) out[i] += data[i] / buffer.numberOfChannels;
    }
    return out;
  }

  function floatToPcm16(samples) {
    const out = new Uint8Array(samples.length * 2);
    const view = new DataView(out.buffer);
    for (let i = 0; i < samples.length; i++) {
      const s = Math.max(-1, Math.min(1, samples[i]));
      view.setInt16(2 * i, Math.round(s * 32767), true);
    }
    return out;
  }

  // ------------------------------------------------------------------ WAV

  function wavHeader(dataBytes, rate) {
    const view = new DataView(new ArrayBuffer(44));
    const ascii = (at, text) => [...text].forEach((ch, i) => view.setUint8(at + i, ch.charCodeAt(0)));
    ascii(0, "RIFF");
    view.setUint32(4, 36 + dataBytes, true);
    ascii(8, "WAVE");
    ascii(12, "fmt ");
    view.setUint32(16, 16, true);
    view.setUint16(20, 1, true); // PCM
    view.setUint16(22, 1, true); // mono
    view.setUint32(24, rate, true);
    view.setUint32(28, rate * 2, true);
    view.setUint16(32, 2, true);
    view.setUint16(34, 16, true);
    ascii(36, "data");
    view.setUint32(40, dataBytes, true);
    return new Uint8Array(view.buffer);
  }

  // `header`: the streamed reply's own header (its chunks, the AI mark's LIST/INFO among them),
  // its sizes set to the whole take's; without one, a plain 44-byte header
  function wavFile(chunks, rate, header = null) {
    const bytes = chunks.reduce((n, c) => n + c.length, 0);
    let head = wavHeader(bytes, rate);
    if (header !== null) {
      head = header.slice();
      const view = new DataView(head.buffer);
      view.setUint32(4, head.length - 8 + bytes, true);
      view.setUint32(head.length - 4, bytes, true);
    }
    return new Blob([head, ...chunks], { type: "audio/wav" });
  }

  // A streamed 16-bit mono WAV read as it comes: the header, then whole samples (an odd byte
  // waits for the next chunk).
  class WavStream {
    constructor() {
      this.head = new Uint8Array(0);
      this.rate = null;
      this.header = null;
      this.carry = null;
    }

    push(bytes) {
      if (this.rate === null) {
        this.head = concat(this.head, bytes);
        const found = parseHeader(this.head);
        if (!found) return new Uint8Array(0);
        this.rate = found.rate;
        this.header = this.head.slice(0, found.dataAt); // kept for the take's file (wavFile)
        bytes = this.head.subarray(found.dataAt);
        this.head = null;
      }
      if (this.carry !== null) {
        bytes = concat(new Uint8Array([this.carry]), bytes);
        this.carry = null;
      }
      if (bytes.length % 2) {
        this.carry = bytes[bytes.length - 1];
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      return bytes;
    }
  }

  function concat(a, b) {
    const out = new Uint8Array(a.length + b.length);
    out.set(a);
    out.set(b, a.length);
    return out;
  }

  function parseHeader(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const tag = (at) => String.fromCharCode(...bytes.subarray(at, at + 4));
    if (bytes.length < 12) return null;
    if (tag(0) !== "RIFF" || tag(8) !== "WAVE") throw new Error("the reply is not a WAV stream");
    let at = 12;
    let rate = null;
    while (at + 8 <= bytes.length) {
      const size = view.getUint32(at + 4, true);
      if (tag(at) === "data") {
        if (rate === null) throw new Error("the WAV stream has no format chunk before its data");
        return { rate, dataAt: at + 8 };
      }
      if (at + 8 + size > bytes.length) return null;
      if (tag(at) === "fmt ") {
        const channels = view.getUint16(at + 10, true);
        const bits = view.getUint16(at + 22, true);
        if (channels !== 1 || bits !== 16) throw new Error(`the WAV stream is ${channels} channels of ${bits} bits`);
        rate = view.getUint32(at + 12, true);
      }
      at += 8 + size + (size % 2);
    }
    return null;
  }

  // ------------------------------------------------------------------ playing while it streams

  class Player {
    constructor() {
      const Ctx = window.AudioContext || window.webkitAudioContext;
      this.ctx = Ctx ? new Ctx() : null;
      this.next = 0;
      this.played = 0; // samples scheduled
      if (this.ctx) this.ctx.resume().catch(() => {});
    }

    play(bytes, rate) {
      if (!this.ctx || !bytes.length) return;
      const n = bytes.length / 2;
      const buffer = this.ctx.createBuffer(1, n, rate);
      const data = buffer.getChannelData(0);
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let i = 0; i < n; i++) data[i] = view.getInt16(2 * i, true) / 32768;
      const source = this.ctx.createBufferSource();
      source.buffer = buffer;
      source.connect(this.ctx.destination);
      const at = Math.max(this.next, this.ctx.currentTime + 0.08); // after an underrun: a short lead
      source.start(at);
      this.next = at + n / rate;
      this.played += n;
    }

    get live() {
      return Boolean(this.ctx);
    }

    stop() {
      if (this.ctx) this.ctx.close().catch(() => {});
      this.ctx = null;
    }
  }

  // ------------------------------------------------------------------ speaking

  function number(text, kind) {
    const t = text.trim();
    if (kind === "integer" && /^[-+]?\d+$/.test(t)) return Number(t);
    if (kind === "number" && t !== "" && Number.isFinite(Number(t))) return Number(t);
    return t; // sent as typed: the API says what it must be
  }

  // the body of a speech request from the page's controls (without the format fields)
  function speechBody() {
    const body = { model: "omnivoice", input: $("text").value };
    const voice = $("voice").value;
    if (voice === DESIGN) {
      body.voice = "auto";
      const items = [...document.querySelectorAll("#design-fields select")].map((s) => s.value).filter(Boolean);
      if (items.length) body.instruct = items.join(", ");
    } else {
      body.voice = voice || "auto";
    }
    const lang = $("lang").value.trim();
    if (lang) body.lang = lang;
    if ($("preset").value) body.preset = $("preset").value;
    for (const control of document.querySelectorAll("#setting-fields [data-key]")) {
      const spec = state.schema.settings[control.dataset.key];
      if (control.value === "") continue;
      body[control.dataset.key] = spec.type === "boolean" ? control.value === "true" : number(control.value, spec.type);
    }
    return body;
  }

  // JSON of the body with the seed written as its digits (a JSON number, whatever its size: a
  // JavaScript number would round a seed over 2**53)
  function withSeed(body, seed) {
    const json = JSON.stringify(body);
    if (seed === null || seed === "") return json;
    const written = /^[-+]?\d+$/.test(seed) ? seed.replace(/^\+/, "") : JSON.stringify(seed);
    return `${json.slice(0, -1)},"seed":${written}}`;
  }

  function pinnedSeed() {
    return $("seed-pin").checked ? $("seed").value.trim() : null;
  }

  function setBusy(busy) {
    $("speak").disabled = busy;
    $("stop").disabled = !busy;
    $("progress").hidden = !busy;
  }

  function stopRun() {
    if (!state.run) return;
    state.run.controller.abort();
    state.run.player.stop();
    state.run = null;
  }

  async function speak() {
    if (!state.schema) {
      await boot(); // the first try failed (its error is shown): once more, then say why again
      if (!state.schema) return;
    }
    stopRun();
    clearErrors();
    const body = speechBody();
    const seed = pinnedSeed();
    const run = { controller: new AbortController(), player: new Player() }; // in the click: sound allowed
    state.run = run;
    dropTake();
    setBusy(true);
    const status = $("status");
    status.textContent = "Generating…";
    status.dataset.played = "0";
    try {
      const json = withSeed({ ...body, response_format: "wav", stream: true }, seed);
      const response = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" },
        body: json, signal: run.controller.signal });
      const used = response.headers.get("X-OmniVoice-Seed");
      if (used !== null) $("seed").value = used;
      const take = await receive(response, run, status);
      finishTake({ ...take, body, seed: used });
      status.textContent = `Done: ${(take.bytes / 2 / take.rate).toFixed(2)} s of audio, seed ${used}.`;
      if (!run.player.live) $("audio").play().catch(() => {});
    } catch (e) {
      if (e.name === "AbortError") status.textContent = "Stopped.";
      else {
        status.textContent = "";
        showError(e);
      }
    } finally {
      if (state.run === run) state.run = null;
      setBusy(false);
    }
  }

  async function receive(response, run, status) {
    const wav = new WavStream();
    const chunks = [];
    let bytes = 0;
    const reader = response.body.getReader();
    for (;;) {
      let part;
      try {
        part = await reader.read();
      } catch (e) {
        if (e.name === "AbortError") throw e;
        throw new ApiFailure(0, `the reply was cut short after ${(bytes / 2 / (wav.rate || 1)).toFixed(1)} s of audio `
          + `(${e.message}): the server's log says why`);
      }
      if (part.done) break;
      const data = wav.push(part.value);
      if (!data.length) continue;
      chunks.push(data.slice());
      bytes += data.length;
      run.player.play(data, wav.rate);
      status.dataset.played = (run.player.played / wav.rate).toFixed(2); // seconds handed to Web Audio
      status.textContent = `Playing while generating: ${(bytes / 2 / wav.rate).toFixed(1)} s received…`;
    }
    if (wav.rate === null) throw new ApiFailure(0, "the reply ended before any audio");
    return { chunks, bytes, rate: wav.rate, header: wav.header };
  }

  function dropTake() {
    if (state.take) URL.revokeObjectURL(state.take.url);
    state.take = null;
    $("audio").removeAttribute("src");
    $("audio").load();
    $("download").disabled = true;
  }

  function finishTake(take) {
    take.url = URL.createObjectURL(wavFile(take.chunks, take.rate, take.header));
    state.take = take;
    const audio = $("audio");
    audio.src = take.url;
    audio.load();
    $("download").disabled = false;
  }

  // WAV and PCM are the take's own bytes; another format is asked for again with the take's seed
  // and settings (the same audio, encoded by the server)
  async function download() {
    const take = state.take;
    if (!take) return;
    clearErrors();
    const format = $("format").value;
    let blob;
    if (format === "wav") blob = wavFile(take.chunks, take.rate, take.header);
    else if (format === "pcm") blob = new Blob(take.chunks, { type: "audio/pcm" });
    else {
      const button = $("download");
      button.disabled = true;
      $("status").textContent = `Encoding ${format}…`;
      try {
        const json = withSeed({ ...take.body, response_format: format, stream: false }, take.seed);
        const r = await api("/v1/audio/speech", { method: "POST", headers: { "Content-Type": "application/json" }, body: json });
        blob = await r.blob();
        $("status").textContent = "";
      } catch (e) {
        $("status").textContent = "";
        showError(e);
        return;
      } finally {
        button.disabled = false;
      }
    }
    const link = element("a", { href: URL.createObjectURL(blob), download: `omnivoice-${take.seed}.${format}` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  }

  // ------------------------------------------------------------------ start

  async function health() {
    try {
      const r = await fetch("/health");
      const h = await r.json();
      const model = String(h.model || "").split("/").pop();
      $("health").textContent = h.status === "ready" ? `${model}: ready` : `${model}: ${h.status}${h.error ? ` (${h.error})` : ""}`;
      if (h.status === "loading") setTimeout(health, 2000);
    } catch (e) {
      $("health").textContent = "the server does not answer";
    }
  }

  async function boot() {
    clearErrors();
    try {
      state.schema = await (await api("/v1/omnivoice/schema")).json();
      buildSettings();
      buildDesign();
      buildLanguages();
      buildFormats();
      countChars();
      await loadVoices();
      document.body.dataset.ready = "true";
    } catch (e) {
      showError(e);
    }
  }

  function wire() {
    wireKeyDialog();
    $("text").addEventListener("input", countChars);
    $("text").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        speak();
      }
    });
    $("speak").addEventListener("click", speak);
    $("stop").addEventListener("click", stopRun);
    $("download").addEventListener("click", download);
    $("seed").addEventListener("input", () => {
      $("seed-pin").checked = $("seed").value.trim() !== "";
    });
    $("voice").addEventListener("change", voiceChanged);
    $("preset").addEventListener("change", describePreset);
    $("reset").addEventListener("click", () => {
      for (const c of document.querySelectorAll("#setting-fields [data-key]")) c.value = "";
      $("preset").value = "";
      describePreset();
    });
    $("upload").addEventListener("change", () => {
      const file = $("upload").files[0];
      if (file) setClip(file, `${file.name}, ${(file.size / 1024).toFixed(0)} KiB`);
    });
    const drop = $("drop");
    drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      const file = event.dataTransfer.files[0];
      if (file) setClip(file, `${file.name}, ${(file.size / 1024).toFixed(0)} KiB`);
    });
    $("record").addEventListener("click", toggleRecord);
    $("save-voice").addEventListener("click", saveVoice);
  }

  document.addEventListener("DOMContentLoaded", () => {
    wire();
    countChars();
    health();
    boot();
  });
})();
