"""The run's dashboard: its metric history (``history``), the HTTP server every run's
driver starts (``server``), a client for it (``client``) and the page (``page.html``,
``dashboard.js``). No ``ray`` import."""
