// A table that puts only the rows in view (plus a few above and below) into the DOM: a real
// <table> whose items each render into a <tbody> of their own (one row, or a row and its details),
// with aria-hidden spacer rows standing in for the rest. The page itself scrolls (no inner
// scroll box); heights are estimated, then measured as items are drawn.
//
// Keyboard: Tab moves through the drawn rows as through any table (the item holding the focus,
// and the few after it, stay drawn however far the page scrolls); ArrowUp / ArrowDown move the
// focus to the same control of the previous / next row, PageUp / PageDown ten rows,
// Ctrl+Home / Ctrl+End to the first / last row, drawing it first and scrolling it into view.
import {
  FocusEvent,
  KeyboardEvent,
  ReactNode,
  TableHTMLAttributes,
  useCallback,
  useEffect,
  useLayoutEffect,
  useRef,
  useState,
} from 'react';

const FOCUSABLE =
  'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea, [tabindex]:not([tabindex="-1"])';

export interface VirtualTableProps<T> extends Omit<TableHTMLAttributes<HTMLTableElement>, 'children'> {
  items: T[];
  itemKey: (item: T) => string;
  // The rows of one item (<tr>s); `index` is its position in `items` (for aria-rowindex).
  renderItem: (item: T, index: number) => ReactNode;
  head: ReactNode; // the <thead>
  columns: number;
  estimate?: number; // px per item before it is measured
  overscan?: number; // items drawn beyond the view on either side
  // Called when the last items are drawn (to load the next page).
  onEndReached?: () => void;
  // Total rows for aria-rowcount when more exist than `items` (-1: unknown).
  rowCount?: number;
}

interface Range {
  start: number;
  end: number; // exclusive
}

// The first index whose item ends below `y`.
function indexAt(offsets: number[], y: number): number {
  let lo = 0;
  let hi = offsets.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid + 1] <= y) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function Spacer({ height, columns }: { height: number; columns: number }) {
  if (height <= 0) return null;
  return (
    <tbody aria-hidden="true" className="v-spacer">
      <tr>
        <td colSpan={columns} style={{ height }} />
      </tr>
    </tbody>
  );
}

export function VirtualTable<T>({
  items,
  itemKey,
  renderItem,
  head,
  columns,
  estimate = 44,
  overscan = 6,
  onEndReached,
  rowCount,
  ...rest
}: VirtualTableProps<T>) {
  const table = useRef<HTMLTableElement>(null);
  const heights = useRef(new Map<string, number>());
  const [view, setView] = useState({ top: 0, bottom: 0 }); // the viewport in table coordinates
  const [, setMeasured] = useState(0);
  const [focusIndex, setFocusIndex] = useState(-1);
  const pendingFocus = useRef<{ index: number; slot: number } | null>(null);

  // Offsets of every item (estimated where not yet drawn).
  const n = items.length;
  const offsets = new Array<number>(n + 1);
  offsets[0] = 0;
  for (let i = 0; i < n; i++) {
    offsets[i + 1] = offsets[i] + (heights.current.get(itemKey(items[i])) ?? estimate);
  }

  const readView = useCallback(() => {
    const t = table.current;
    if (!t) return;
    // From the table's box (the header cells are sticky: the header's own box moves).
    const body = t.getBoundingClientRect().top + (t.tHead?.offsetHeight ?? 0);
    const top = -body;
    const bottom = top + window.innerHeight;
    setView((v) => (Math.abs(v.top - top) < 1 && Math.abs(v.bottom - bottom) < 1 ? v : { top, bottom }));
  }, []);

  useEffect(() => {
    readView();
    window.addEventListener('scroll', readView, { passive: true });
    window.addEventListener('resize', readView);
    return () => {
      window.removeEventListener('scroll', readView);
      window.removeEventListener('resize', readView);
    };
  }, [readView]);

  // The ranges drawn: the view (with overscan) and the focused item with a few after it.
  const ranges: Range[] = [];
  if (n > 0) {
    const first = Math.max(0, indexAt(offsets, Math.max(0, view.top)) - overscan);
    const last = Math.min(n, indexAt(offsets, Math.max(0, view.bottom)) + 1 + overscan);
    ranges.push({ start: first, end: Math.max(first, last) });
    if (focusIndex >= 0 && focusIndex < n) {
      const f = { start: Math.max(0, focusIndex - 1), end: Math.min(n, focusIndex + 4) };
      if (f.end < ranges[0].start) ranges.unshift(f);
      else if (f.start > ranges[0].end) ranges.push(f);
      else ranges[0] = { start: Math.min(f.start, ranges[0].start), end: Math.max(f.end, ranges[0].end) };
    }
  }
  const drawnEnd = ranges.length ? ranges[ranges.length - 1].end : 0;

  // Measure what was drawn; a changed height draws again with the new offsets.
  useLayoutEffect(() => {
    const t = table.current;
    if (!t) return;
    let changed = false;
    for (const body of Array.from(t.tBodies)) {
      const i = body.dataset.vi;
      if (i === undefined) continue;
      const item = items[Number(i)];
      if (item === undefined) continue;
      const key = itemKey(item);
      const h = body.getBoundingClientRect().height;
      if (Math.abs((heights.current.get(key) ?? -1) - h) > 0.5) {
        heights.current.set(key, h);
        changed = true;
      }
    }
    if (changed) setMeasured((m) => m + 1);
    // A keyboard move: the target item is drawn now.
    const pf = pendingFocus.current;
    if (pf) {
      const body = t.querySelector<HTMLElement>(`tbody[data-vi="${pf.index}"]`);
      if (body) {
        pendingFocus.current = null;
        const controls = Array.from(body.querySelectorAll<HTMLElement>(FOCUSABLE));
        const target = controls[Math.min(pf.slot, controls.length - 1)];
        if (target) {
          target.focus({ preventScroll: true });
          target.scrollIntoView({ block: 'nearest' });
        }
      }
    }
  });

  // Asked again after every render that draws the end (a no-op while a page is on its way).
  useEffect(() => {
    if (onEndReached && n > 0 && drawnEnd >= n - overscan) onEndReached();
  });

  const itemOf = (el: Element | null): { body: HTMLElement; index: number } | null => {
    const body = el?.closest<HTMLElement>('tbody[data-vi]');
    if (!body || body.closest('table') !== table.current) return null;
    return { body, index: Number(body.dataset.vi) };
  };

  const onFocus = (e: FocusEvent) => {
    const it = itemOf(e.target as Element);
    if (it && it.index !== focusIndex) setFocusIndex(it.index);
  };

  const onKeyDown = (e: KeyboardEvent) => {
    const target = e.target as HTMLElement;
    if (target.closest('input, textarea, select, [contenteditable="true"], form')) return;
    const it = itemOf(target);
    if (!it) return;
    let to = -1;
    if (e.key === 'ArrowDown') to = it.index + 1;
    else if (e.key === 'ArrowUp') to = it.index - 1;
    else if (e.key === 'PageDown') to = Math.min(n - 1, it.index + 10);
    else if (e.key === 'PageUp') to = Math.max(0, it.index - 10);
    else if (e.key === 'Home' && e.ctrlKey) to = 0;
    else if (e.key === 'End' && e.ctrlKey) to = n - 1;
    else return;
    e.preventDefault();
    if (to < 0 || to >= n || to === it.index) return;
    const controls = Array.from(it.body.querySelectorAll<HTMLElement>(FOCUSABLE));
    const slot = Math.max(0, controls.indexOf(target));
    pendingFocus.current = { index: to, slot };
    setFocusIndex(to);
  };

  const parts: ReactNode[] = [];
  let at = 0;
  for (const r of ranges) {
    parts.push(<Spacer key={`gap-${at}`} height={offsets[r.start] - offsets[at]} columns={columns} />);
    for (let i = r.start; i < r.end; i++) {
      parts.push(
        // Each item's rows are memoized by the caller: a re-render of the table re-renders the
        // rows whose props changed only.
        <tbody key={itemKey(items[i])} data-vi={i}>
          {renderItem(items[i], i)}
        </tbody>,
      );
    }
    at = r.end;
  }
  parts.push(<Spacer key="gap-end" height={offsets[n] - offsets[at]} columns={columns} />);

  return (
    <table
      ref={table}
      {...rest}
      aria-rowcount={rowCount ?? n + 1}
      data-rows={n}
      onFocus={onFocus}
      onKeyDown={onKeyDown}
    >
      {head}
      {parts}
    </table>
  );
}
