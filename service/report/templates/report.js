// The served results page's live parts: the SQL box, and refreshing the plots from the event stream.
// Configuration comes from the page (#polis-report-config); every URL is the service's own.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("polis-report-config").textContent);

  function cell(text) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : (typeof text === "object" ? JSON.stringify(text) : String(text));
    return td;
  }

  function showSummary(summary) {
    const list = document.getElementById("polis-summary");
    list.replaceChildren(...Object.entries(summary).flatMap(([key, value]) => {
      const dt = document.createElement("dt");
      const dd = document.createElement("dd");
      dt.textContent = key;
      dd.textContent = value === null || value === undefined ? "" : String(value);
      return [dt, dd];
    }));
    const status = document.getElementById("polis-status");
    status.textContent = summary.status;
    status.className = "status status-" + String(summary.status).replace(/ /g, "-");
  }

  // Values change in place; a new plot, line or bar category needs the page built again.
  async function refresh() {
    const response = await fetch(config.data_url, {headers: {Accept: "application/json"}});
    if (!response.ok) { return; }
    const body = await response.json();
    if (JSON.stringify(body.signature) !== JSON.stringify(config.signature)) {
      window.location.reload();
      return;
    }
    const doc = Bokeh.documents[0];
    for (const panel of body.report.panels) {
      panel.lines.forEach((line, i) => {
        const source = doc.get_model_by_name(panel.key + "/" + i);
        if (source !== null) { source.data = {x: line.x, y: line.y}; }
      });
    }
    showSummary(body.report.summary);
  }

  if (config.live) {
    const events = new EventSource(config.events_url);
    events.addEventListener("tick", refresh);
    events.addEventListener("status", refresh);
    events.addEventListener("final", () => { events.close(); refresh(); });
  }

  const form = document.getElementById("polis-sql-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const status = document.getElementById("polis-sql-status");
    const result = document.getElementById("polis-sql-result");
    status.textContent = "running…";
    result.replaceChildren();
    const response = await fetch(config.sql_url, {
      method: "POST",
      headers: {"Content-Type": "application/json", Accept: "application/json"},
      body: JSON.stringify({sql: document.getElementById("polis-sql").value, max_rows: config.sql_max_rows}),
    });
    const body = await response.json();
    if (!response.ok) {
      status.textContent = "refused: " + (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail));
      return;
    }
    status.textContent = body.rows.length + " row(s)" + (body.truncated ? ", cut at the row limit" : "");
    const table = document.createElement("table");
    table.className = "grid";
    const head = document.createElement("tr");
    for (const column of body.columns) {
      const th = document.createElement("th");
      th.textContent = column.name;
      head.append(th);
    }
    table.append(head);
    for (const row of body.rows) {
      const tr = document.createElement("tr");
      tr.append(...row.map(cell));
      table.append(tr);
    }
    result.append(table);
  });
})();
