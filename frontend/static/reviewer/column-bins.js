// A figure too narrow for one column per word (a long context on a phone: hundreds of
// columns under a pixel wide) gives neighbouring words one column: their attention added
// up, labelled by the first and the last. A column never mixes kinds of words, so the case
// text's mark and the template's columns stay where they are.
export const MIN_COLUMN_PX = 3;

// How many columns `px` of plot can show, each at least MIN_COLUMN_PX wide (never fewer
// than `floor`, so a figure squeezed by a layout still says something).
export const columnsFitting = (px, floor = 24) => Math.max(floor, Math.floor(px / MIN_COLUMN_PX));

// `columns`: [{kind, label, parts: [[position, fraction]]}] in order. Returns them as they
// are when at most `most`, else bins of up to `size` neighbours each, as columns of their own
// ({kind, label, parts, words}), with `size`.
export function binColumns(columns, most) {
  if (columns.length <= most) return { columns, size: 1 };
  const size = Math.ceil(columns.length / most);
  const bins = [];
  for (const column of columns) {
    const bin = bins[bins.length - 1];
    if (bin && bin.kind === column.kind && bin.words < size) {
      bin.parts.push(...column.parts);
      bin.words += 1;
      bin.lastLabel = column.label;
    } else {
      bins.push({ kind: column.kind, parts: [...column.parts], words: 1, firstLabel: column.label, lastLabel: column.label });
    }
  }
  const binned = bins.map(({ kind, parts, words, firstLabel, lastLabel }) => ({
    kind, parts, words, label: words > 1 ? `${firstLabel} … ${lastLabel}` : firstLabel,
  }));
  return { columns: binned, size };
}
