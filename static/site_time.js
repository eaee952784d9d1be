// Times as the server renders them (preferences.time_format): in the user's zone, with the
// zone's name. The zone comes from <body data-time-zone>, set from the user's preference.
(function () {
  "use strict";
  const zone = document.body.dataset.timeZone || "UTC";
  const formats = new Map();
  function formatter(millis) {
    const key = millis ? "ms" : "s";
    if (!formats.has(key)) {
      const options = { timeZone: zone, hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" };
      if (millis) options.fractionalSecondDigits = 3;
      let format;
      try { format = new Intl.DateTimeFormat("en-US", options); } catch (e) { format = new Intl.DateTimeFormat("en-US", { ...options, timeZone: "UTC" }); }
      formats.set(key, format);
    }
    return formats.get(key);
  }
  // "18:42:07 UTC" (or "18:42:07.123 UTC" with millis) for epoch milliseconds.
  function clock(ms, opts) {
    const parts = formatter(Boolean(opts && opts.millis)).formatToParts(new Date(ms));
    const get = (type) => (parts.find((p) => p.type === type) || { value: "" }).value;
    const fraction = get("fractionalSecond");
    return `${get("hour")}:${get("minute")}:${get("second")}${fraction ? "." + fraction : ""} ${get("timeZoneName")}`;
  }
  window.siteTime = { zone, clock };
})();
