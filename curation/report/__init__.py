"""The run report: the funnel and label histograms as text and Markdown, the HTML pages, the dataset statistics."""
