// Vellum's service worker on the replay host (core/web/origins.py): ReplayWeb.page's own worker
// (lib/rwp-sw.js, imported below), except that every page, frame and worker script it answers with
// also carries Vellum's containment policy (core.web.origins.CONTAINMENT_CSP). ReplayWeb.page gives
// replayed pages a policy of its own that still lets them open WebSockets to any host, and its
// app page none, so without this a replayed page could send what it reads elsewhere. A second
// policy only ever narrows the first: the browser enforces both.
"use strict";

const VELLUM_CSP = "{{ csp|escapejs }}";
const GOVERNED = new Set(["document", "iframe", "frame", "embed", "object", "worker", "sharedworker"]);
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

function withVellumPolicy(response) {
  // Opaque and redirect-filtered answers have headers nobody may read or change.
  if (!response || response.type === "opaque" || response.type === "opaqueredirect") {
    return response;
  }
  const headers = new Headers(response.headers);
  headers.append("Content-Security-Policy", VELLUM_CSP);
  return new Response(NULL_BODY.has(response.status) ? null : response.body, {
    status: response.status,
    statusText: response.statusText,
    headers,
  });
}

// ReplayWeb.page registers its fetch handler while rwp-sw.js runs; wrap it as it does so.
const addListener = self.addEventListener.bind(self);
self.addEventListener = (type, listener, options) => {
  if (type !== "fetch") {
    return addListener(type, listener, options);
  }
  const governed = (event) => {
    if (GOVERNED.has(event.request.destination)) {
      const respondWith = event.respondWith.bind(event);
      event.respondWith = (answer) => respondWith(Promise.resolve(answer).then(withVellumPolicy));
    }
    return listener(event);
  };
  return addListener(type, governed, options);
};

importScripts("./lib/rwp-sw.js");
