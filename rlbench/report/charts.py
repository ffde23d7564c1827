"""Small inline-SVG charts shared by the report's sections; every value is printed on the chart, so
nothing needs hovering."""
import html


def stacked_bars(items, parts, label_w: int = 330, bar_w: int = 560, row_h: int = 26) -> str:
    """items: [(label, {part: share})]; parts: [(key, legend text, colour)]. One horizontal bar per item,
    its segments in `parts` order, the share printed inside every segment wide enough to hold it."""
    bars = []
    for i, (label, shares) in enumerate(items):
        y, x = 10 + i * row_h, label_w
        bars.append(f"<text x='{label_w - 6}' y='{y + 15}' text-anchor='end'>{html.escape(label[:52])}</text>")
        for key, text, colour in parts:
            share = shares.get(key)
            if share is None or share != share or share <= 0:
                continue
            w = bar_w * share
            bars.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{row_h - 6}' fill='{colour}'>"
                        f"<title>{html.escape(text)}: {share:.0%}</title></rect>")
            if w > 30:
                bars.append(f"<text x='{x + w / 2:.1f}' y='{y + 15}' text-anchor='middle' fill='#fff'>{share:.0%}</text>")
            x += w
    legend = "".join(f"<span style='display:inline-block;margin-right:14px'><span style='display:inline-block;"
                     f"width:12px;height:12px;background:{colour};margin-right:4px'></span>{html.escape(text)}</span>"
                     for _, text, colour in parts)
    height = row_h * len(items) + 20
    return (f"<p>{legend}</p><svg width='{label_w + bar_w + 20}' height='{height}' class='chart stacked' "
            f"xmlns='http://www.w3.org/2000/svg'>{''.join(bars)}</svg>")
