// A CodeMirror editor for one CEL expression, with the server's problems drawn at their
// positions (lint diagnostics) and listed in words under it.
import { useEffect, useRef } from 'react';
import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { Diagnostic, lintGutter, setDiagnostics } from '@codemirror/lint';
import { EditorState } from '@codemirror/state';
import { EditorView, keymap, placeholder as placeholderExt } from '@codemirror/view';

export interface CelProblem {
  message: string;
  line?: number;
  column?: number;
  offset?: number; // byte offset in the UTF-8 text
}

// The UTF-16 index of a UTF-8 byte offset in `text`.
function indexOfByte(text: string, offset: number): number {
  let bytes = 0;
  let i = 0;
  while (i < text.length && bytes < offset) {
    const cp = text.codePointAt(i)!;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += cp > 0xffff ? 2 : 1;
  }
  return i;
}

export function CelEditor({
  id,
  label,
  value,
  onChange,
  problems,
  describedBy,
}: {
  id: string;
  label: string;
  value: string;
  onChange: (v: string) => void;
  problems: CelProblem[];
  describedBy?: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const changed = useRef(onChange);
  changed.current = onChange;

  useEffect(() => {
    const attributes: Record<string, string> = {
      'aria-label': label,
      'aria-multiline': 'true',
      id,
    };
    // The id of the element listing the problems (present only while there are some).
    if (describedBy) attributes['aria-describedby'] = describedBy;
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          history(),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          lintGutter(),
          EditorView.lineWrapping,
          placeholderExt("device.driver == 'gpu.nvidia.com'"),
          EditorView.contentAttributes.of(attributes),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) changed.current(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = v;
    return () => {
      v.destroy();
      view.current = null;
    };
    // The editor owns its text after creation; `value` only seeds it.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // A value set from outside (loading the class) replaces the text.
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) {
      v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
    }
  }, [value]);

  useEffect(() => {
    const v = view.current;
    if (!v) return;
    const text = v.state.doc.toString();
    const diagnostics: Diagnostic[] = problems.map((p) => {
      const from = p.offset === undefined ? 0 : Math.min(indexOfByte(text, p.offset), text.length);
      const to = p.offset === undefined ? text.length : Math.min(from + 1, text.length);
      return { from, to: Math.max(from, to), severity: 'error', message: p.message };
    });
    v.dispatch(setDiagnostics(v.state, diagnostics));
  }, [problems]);

  return <div className="cel-editor" ref={host} data-invalid={problems.length > 0} />;
}
