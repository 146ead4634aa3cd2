import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'react';
import { useTransport } from './engine';
import type { TerminalTarget } from './transport';

/**
 * An xterm.js terminal over a transport byte socket. `prepare` creates what the socket attaches to (an exec
 * instance) and returns the target and how to resize it; resizes follow the element's size.
 */
export function TerminalView(props: {
  prepare: () => Promise<{ target: TerminalTarget; resize: (rows: number, cols: number) => Promise<unknown> }>;
  label: string;
}) {
  const transport = useTransport();
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting…');
  const prepare = useRef(props.prepare);

  useEffect(() => {
    const term = new Terminal({ cursorBlink: true, fontSize: 13, fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace', convertEol: false });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    fit.fit();
    let disposed = false;
    let cleanup = () => undefined as void;
    prepare
      .current()
      .then(({ target, resize }) => {
        if (disposed) return;
        const socket = transport.terminal(target);
        setStatus('connected');
        socket.onData((bytes) => term.write(bytes));
        socket.onClose((reason) => {
          setStatus(`ended: ${reason}`);
          term.write(`\r\n\x1b[2m[${reason}]\x1b[0m\r\n`);
        });
        const input = term.onData((data) => socket.send(data));
        let lastSize = '';
        const sendSize = () => {
          const size = `${term.rows}x${term.cols}`;
          if (size === lastSize) return;
          lastSize = size;
          const { rows, cols } = term;
          // data-size: the size the process was told (once the engine took it), for tests and tooltips.
          resize(rows, cols).then(() => host.current?.setAttribute('data-size', `${rows} ${cols}`), () => undefined);
        };
        const onResize = term.onResize(sendSize);
        // The first resize once the process runs on the other side.
        setTimeout(sendSize, 150);
        const observer = new ResizeObserver(() => fit.fit());
        observer.observe(host.current!);
        term.focus();
        cleanup = () => {
          observer.disconnect();
          input.dispose();
          onResize.dispose();
          socket.close();
        };
      })
      .catch((err: Error) => {
        setStatus(`failed: ${err.message}`);
        term.write(`\x1b[31m${err.message}\x1b[0m\r\n`);
      });
    return () => {
      disposed = true;
      cleanup();
      term.dispose();
    };
  }, [transport]);

  return (
    <div className="terminal-wrap">
      <div className="terminal-bar">
        <span>{props.label}</span> <span className="muted" data-testid="terminal-status">{status}</span>
      </div>
      <div className="terminal" ref={host} data-testid="terminal" />
    </div>
  );
}
