// The Overview's utilization chart: allocated / free / unhealthy devices over the last hour, day
// or week (or allocated devices per class, model, node or namespace), drawn with uPlot from a
// UtilizationHistoryReview. It asks again when the claims change (the Overview watches them), at
// most every 2 s, so a binding shows up without a reload and without polling.
import { useEffect, useRef, useState } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import {
  UtilizationGroupBy,
  UtilizationStatus,
  errorText,
  reviewUtilization,
} from './api';

const RANGES = [
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last day' },
  { value: '7d', label: 'Last week' },
];

const GROUPINGS: { value: UtilizationGroupBy; label: string }[] = [
  { value: '', label: 'All devices' },
  { value: 'class', label: 'Allocated by class' },
  { value: 'model', label: 'Allocated by model' },
  { value: 'node', label: 'Allocated by node' },
  { value: 'namespace', label: 'Allocated by namespace' },
];

// Colours are paired with dashes and the legend's words: colour never carries meaning alone.
const PALETTE = ['#1f5fbf', '#b3261e', '#1b6e35', '#8a5a00', '#6b3fa0', '#00707a', '#9c2f6b', '#4d5b69'];
const MAX_LINES = 8;
const REFRESH_MS = 2_000;

interface Line {
  label: string;
  values: number[];
  stroke: string;
  dash?: number[];
}

// The lines to draw: the four series of the whole inventory, or allocated per group (the
// groups with the highest peaks; the rest summed as "other").
function linesOf(status: UtilizationStatus, groupBy: UtilizationGroupBy): Line[] {
  if (groupBy === '') {
    const all = status.groups[0];
    if (!all) return [];
    return [
      { label: 'Allocated', values: all.allocated, stroke: PALETTE[0] },
      { label: 'Peak allocated', values: all.peakAllocated, stroke: PALETTE[0], dash: [4, 4] },
      { label: 'Free', values: all.free || [], stroke: PALETTE[2], dash: [10, 3] },
      { label: 'Unhealthy', values: all.unhealthy || [], stroke: PALETTE[1], dash: [2, 2] },
    ];
  }
  const peak = (v: number[]) => v.reduce((a, b) => Math.max(a, b), 0);
  const sorted = [...status.groups].sort((a, b) => peak(b.peakAllocated) - peak(a.peakAllocated));
  const shown = sorted.slice(0, MAX_LINES - 1);
  const rest = sorted.slice(MAX_LINES - 1);
  const lines: Line[] = shown.map((g, i) => ({
    label: g.name || '(none)',
    values: g.allocated,
    stroke: PALETTE[i % PALETTE.length],
    dash: i % 2 ? [6, 3] : undefined,
  }));
  if (rest.length) {
    lines.push({
      label: `${rest.length} other`,
      values: status.times.map((_, b) => rest.reduce((sum, g) => sum + g.allocated[b], 0)),
      stroke: PALETTE[MAX_LINES - 1],
      dash: [1, 3],
    });
  }
  return lines;
}

export function UtilizationChart({ changeKey }: { changeKey: number | string }) {
  const [range, setRange] = useState('1h');
  const [groupBy, setGroupBy] = useState<UtilizationGroupBy>('');
  // The answer with the range and grouping it was asked for (the controls may be ahead of it).
  const [shown, setShown] = useState<{
    status: UtilizationStatus;
    range: string;
    groupBy: UtilizationGroupBy;
  } | null>(null);
  const [error, setError] = useState('');
  const [refresh, setRefresh] = useState(0);
  const plotRef = useRef<HTMLDivElement>(null);
  const lastFetch = useRef(0);

  // Claims, slices or taint rules changed: ask again, at most every REFRESH_MS.
  useEffect(() => {
    const wait = Math.max(0, lastFetch.current + REFRESH_MS - Date.now());
    const timer = window.setTimeout(() => setRefresh((r) => r + 1), wait);
    return () => window.clearTimeout(timer);
  }, [changeKey]);

  // Answers to superseded requests are dropped rather than the requests aborted: a review is
  // short and an aborted fetch reads as a failed request.
  useEffect(() => {
    let current = true;
    lastFetch.current = Date.now();
    reviewUtilization({ range, groupBy })
      .then((s) => {
        if (!current) return;
        setShown({ status: s, range, groupBy });
        setError('');
      })
      .catch((e) => {
        if (current) setError(errorText(e));
      });
    return () => {
      current = false;
    };
  }, [range, groupBy, refresh]);

  const status = shown?.status;
  const lines = shown ? linesOf(shown.status, shown.groupBy) : [];
  useEffect(() => {
    const el = plotRef.current;
    if (!el || !status || lines.length === 0) return;
    const opts: uPlot.Options = {
      width: Math.max(320, el.clientWidth || 800),
      height: 240,
      series: [
        {},
        ...lines.map((l) => ({ label: l.label, stroke: l.stroke, dash: l.dash, width: 2, points: { show: false } })),
      ],
      axes: [{}, { label: 'devices' }],
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    };
    const data: uPlot.AlignedData = [status.times, ...lines.map((l) => l.values)];
    const plot = new uPlot(opts, data, el);
    return () => plot.destroy();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shown]);

  const all = shown && shown.groupBy === '' ? shown.status.groups[0] : undefined;
  const last = (v?: number[]) => (v && v.length ? v[v.length - 1] : 0);
  const peak = all ? all.peakAllocated.reduce((a, b) => Math.max(a, b), 0) : 0;
  const rangeLabel = RANGES.find((r) => r.value === shown?.range)?.label.toLowerCase();
  const summary = all
    ? `Now ${last(all.allocated)} allocated, ${last(all.free)} free, ${last(all.unhealthy)} unhealthy of ${all.devices} devices; at most ${peak} allocated in the ${rangeLabel}.`
    : status
      ? `Allocated devices of ${status.groups.length} groups in the ${rangeLabel}.`
      : '';

  return (
    <section aria-labelledby="utilization-title" className="utilization">
      <h2 id="utilization-title">Utilization</h2>
      <div className="toolbar" role="group" aria-label="Time range">
        {RANGES.map((r) => (
          <button
            key={r.value}
            type="button"
            className={range === r.value ? '' : 'secondary'}
            aria-pressed={range === r.value}
            onClick={() => setRange(r.value)}
          >
            {r.label}
          </button>
        ))}
        <label htmlFor="utilization-group">Show</label>
        <select
          id="utilization-group"
          value={groupBy}
          onChange={(e) => setGroupBy(e.target.value as UtilizationGroupBy)}
        >
          {GROUPINGS.map((g) => (
            <option key={g.value} value={g.value}>
              {g.label}
            </option>
          ))}
        </select>
      </div>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {!status && !error && <p className="loading">Loading utilization…</p>}
      <div
        ref={plotRef}
        className="chart"
        role="img"
        aria-label={summary}
        data-testid="utilization-chart"
        data-range={shown?.range ?? ''}
        data-buckets={status?.times.length ?? 0}
        data-last-allocated={all ? last(all.allocated) : ''}
        data-peak-allocated={all ? peak : ''}
      />
      {summary && (
        <p className="muted" data-testid="utilization-summary">
          {summary} Buckets of {status ? Math.round(status.stepSeconds / 60) : 0} min; devices
          are today&apos;s inventory.
        </p>
      )}
    </section>
  );
}
