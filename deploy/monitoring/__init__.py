"""Prometheus and Grafana for clusters: scrape config, dashboard and how to use them."""
