// Op table: sort by a column header click, filter by text and by category. Works on the rows already in
// the page (readable without JavaScript); writes only textContent and attributes, never HTML.
(() => {
  "use strict";
  const table = document.getElementById("op-table");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const headers = Array.from(table.tHead.rows[0].cells);
  const filter = document.getElementById("op-filter");
  const category = document.getElementById("op-category");
  const count = document.getElementById("op-count");

  const apply = () => {
    const query = filter.value.trim().toLowerCase();
    const wanted = category.value;
    let shown = 0;
    for (const row of rows) {
      const match = (!wanted || row.dataset.category === wanted) &&
        (!query || row.textContent.toLowerCase().includes(query));
      row.hidden = !match;
      if (match) shown += 1;
    }
    count.textContent = `${shown.toLocaleString("en")} of ${rows.length.toLocaleString("en")} ops shown`;
  };

  const sortKey = (row, index, numeric) => {
    const cell = row.cells[index];
    const raw = cell.dataset.sort ?? cell.textContent.trim();
    return numeric ? Number(raw) : raw.toLowerCase();
  };

  const sortBy = (th, index) => {
    const numeric = th.dataset.type === "num";
    const first = numeric ? "descending" : "ascending";  // counts read best largest first
    const direction = th.getAttribute("aria-sort") === first ? (numeric ? "ascending" : "descending") : first;
    headers.forEach((other) => other.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", direction);
    const sign = direction === "ascending" ? 1 : -1;
    rows.sort((a, b) => {
      const x = sortKey(a, index, numeric);
      const y = sortKey(b, index, numeric);
      return x < y ? -sign : x > y ? sign : 0;
    });
    body.append(...rows);
  };

  headers.forEach((th, index) => {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = th.textContent;
    button.title = "Sort by this column";
    th.textContent = "";
    th.append(button);
    button.addEventListener("click", () => sortBy(th, index));
  });
  filter.addEventListener("input", apply);
  category.addEventListener("change", apply);
  document.getElementById("op-controls").hidden = false;
  apply();
})();
