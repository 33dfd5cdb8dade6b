// The queue page's websocket (reviewer/web/queue_consumer.py): one `queue` message whenever
// a generation waiting in one of the viewer's domains changes status or claim. The messages
// are not numbered or stored, so after a dropped connection the page reads its rows again
// (`reconnected`) instead of asking for what it missed.
import { CLOSE } from "./protocol.js";
import { $, L } from "./page.js";
import { notice } from "./queue.js";

const QUEUE = "queue"; // reviewer/events/queue.py

export function connectQueue({ message, reconnected }) {
  let retries = 0;
  const open = () => {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/queue/`);
    socket.onopen = () => {
      if (retries) reconnected();
      retries = 0;
      setConnection("live");
    };
    socket.onmessage = (event) => {
      const data = JSON.parse(event.data);
      if (data.type === QUEUE) message(data);
    };
    socket.onclose = (event) => {
      if (event.code === CLOSE.UNAUTHENTICATED) {
        setConnection("closed");
        notice(L.loggedOut); // the rows stop following the floor: say why and what to do
        return;
      }
      retries += 1;
      setConnection("reconnecting");
      setTimeout(open, Math.min(5000, 300 * 2 ** Math.min(retries, 5)));
    };
  };
  open();
}

function setConnection(name) {
  const badge = $("connection");
  badge.hidden = false;
  badge.dataset.state = name === "live" ? "connected" : name;
  badge.textContent = L[name] || name;
}
